use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn ToolsPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Tools"</h1>
        </Frame>
    }
}
