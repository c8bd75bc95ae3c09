//! Ids and keys copy with one click.

use leptos::prelude::*;

/// Shows `text` in monospace with a button that copies it to the clipboard. Nothing here is
/// hydrated: one listener for the whole page (`crate::browser::copy`) handles every such
/// button, so the rows a live update brings need no island each. With `truncate` a long text
/// ends in an ellipsis where space is short (lists; the full text is on its own page and in
/// the tooltip), and the button still copies all of it.
#[component]
pub fn CopyText(
    text: String,
    #[prop(into)] label: String,
    #[prop(optional)] truncate: bool,
) -> impl IntoView {
    let what = if label.is_empty() {
        "value".to_owned()
    } else {
        label
    };
    view! {
        <span class="copyable" class:truncate=truncate>
            <code title=truncate.then(|| text.clone())>{text.clone()}</code>
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
