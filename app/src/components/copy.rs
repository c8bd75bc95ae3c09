//! Ids and keys copy with one click.

use leptos::prelude::*;

/// Shows `text` in monospace with a button that copies it to the clipboard. Nothing here is
/// hydrated: one listener for the whole page (`crate::browser::copy`) handles every such
/// button, so the rows a live update brings need no island each.
#[component]
pub fn CopyText(text: String, #[prop(into)] label: String) -> impl IntoView {
    let what = if label.is_empty() {
        "value".to_owned()
    } else {
        label
    };
    view! {
        <span class="copyable">
            <code>{text.clone()}</code>
            <button
                type="button"
                class="copy"
                data-copy=text
                aria-label=format!("Copy {what}")
                title=format!("Copy {what}")
            >
                "Copy"
            </button>
        </span>
    }
}
