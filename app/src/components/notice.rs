//! Errors from the server, and empty states that say what to do next.

use leptos::prelude::*;

use crate::UiError;

/// The server's message, as an alert.
#[component]
pub fn ErrorNote(error: UiError) -> impl IntoView {
    view! { <p class="error" role="alert">{error.to_string()}</p> }
}

/// Nothing to show, and what to do about it.
#[component]
pub fn EmptyState(title: &'static str, children: Children) -> impl IntoView {
    view! {
        <div class="empty">
            <p><strong>{title}</strong></p>
            <p class="muted">{children()}</p>
        </div>
    }
}
