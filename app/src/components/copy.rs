//! Ids and keys copy with one click.

use leptos::prelude::*;

/// Shows `text` in monospace with a button that copies it to the clipboard (an island, for
/// server-rendered parts of a page).
#[island]
pub fn CopyText(text: String, #[prop(into)] label: String) -> impl IntoView {
    view! { <Copyable text label /> }
}

/// The same, for use inside another island.
#[component]
pub fn Copyable(text: String, #[prop(optional, into)] label: String) -> impl IntoView {
    let copied = RwSignal::new(false);
    let value = text.clone();
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let clipboard = window().navigator().clipboard();
            let _ = clipboard.write_text(&value);
            copied.set(true);
            set_timeout(move || copied.set(false), std::time::Duration::from_secs(2));
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = &value;
    };
    let what = if label.is_empty() {
        "value".to_owned()
    } else {
        label
    };
    view! {
        <span class="copyable">
            <code>{text}</code>
            <button
                type="button"
                class="copy"
                aria-label=format!("Copy {what}")
                title=format!("Copy {what}")
                on:click=copy
            >
                {move || if copied.get() { "Copied" } else { "Copy" }}
            </button>
        </span>
    }
}
