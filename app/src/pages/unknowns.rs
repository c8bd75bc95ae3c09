use leptos::prelude::*;

use crate::components::Frame;

/// Placeholder until the page lands (issue #6).
#[component]
pub fn UnknownsPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Unknowns"</h1>
        </Frame>
    }
}
