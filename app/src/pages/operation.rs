use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn OperationPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Operation"</h1>
        </Frame>
    }
}
