use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Approvals"</h1>
        </Frame>
    }
}
