use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn OperationsPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Operations"</h1>
        </Frame>
    }
}
