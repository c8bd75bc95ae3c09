//! Every Copy button of the page (`button[data-copy]`, see `CopyText`) through one listener
//! on the window: it copies the button's text and says "Copied" for two seconds.

use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::Element;

const SAID_FOR: Duration = Duration::from_secs(2);

/// Starts listening (once per page: the hydration mark calls it).
pub fn listen() {
    let handle = window_event_listener(leptos::ev::click, |event| {
        let button = event
            .target()
            .and_then(|target| target.dyn_into::<Element>().ok())
            .and_then(|element| element.closest("button[data-copy]").ok().flatten());
        if let Some(button) = button {
            copy(button);
        }
    });
    // The listener lives as long as the page.
    std::mem::forget(handle);
}

fn copy(button: Element) {
    let text = button.get_attribute("data-copy").unwrap_or_default();
    let _ = window().navigator().clipboard().write_text(&text);
    button.set_text_content(Some("Copied"));
    set_timeout(move || button.set_text_content(Some("Copy")), SAID_FOR);
}
