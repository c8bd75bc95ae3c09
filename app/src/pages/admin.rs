use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn AdminPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Admin"</h1>
        </Frame>
    }
}
