//! The checkboxes of a list's rows that bulk actions act on (`input[name=…]`, each with the
//! row's id as its value and its key in `data-key`), read and ticked in the browser.

use leptos::prelude::*;
use uuid::Uuid;
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;

/// The checkboxes named `name` that are ticked now, as (id, key).
pub fn ticked(name: &str) -> Vec<(Uuid, String)> {
    matching(name, ":checked")
        .into_iter()
        .filter_map(|input| {
            let id = input.value().parse().ok()?;
            Some((id, input.get_attribute("data-key").unwrap_or_default()))
        })
        .collect()
}

/// Ticks or clears every checkbox named `name`.
pub fn tick_all(name: &str, on: bool) {
    for input in matching(name, "") {
        input.set_checked(on);
    }
}

/// How many checkboxes named `name` the page has.
pub fn count(name: &str) -> usize {
    matching(name, "").len()
}

/// The checkboxes named `name` that match `state`, a CSS pseudo-class ("" for all of them).
fn matching(name: &str, state: &str) -> Vec<HtmlInputElement> {
    let selector = format!("input[name={name}]{state}");
    let Ok(found) = document().query_selector_all(&selector) else {
        return Vec::new();
    };
    (0..found.length())
        .filter_map(|index| found.item(index))
        .filter_map(|node| node.dyn_into::<HtmlInputElement>().ok())
        .collect()
}

/// Fires whenever a checkbox of the page changes or a live update morphed the page (rows
/// that came or went change the selection too), so what depends on the selection is drawn
/// again. One for the page, with its two listeners, however many islands ask: the window's
/// listeners and the islands' effects outlive the islands (see `copy`).
pub fn selection_changes() -> ArcTrigger {
    thread_local! {
        static CHANGES: std::cell::OnceCell<ArcTrigger> = const { std::cell::OnceCell::new() };
    }
    CHANGES.with(|changes| {
        changes
            .get_or_init(|| {
                let changes = ArcTrigger::new();
                let on_change = changes.clone();
                let _ = window_event_listener(leptos::ev::change, move |_| on_change.notify());
                let on_morph = changes.clone();
                let _ = window_event_listener_untyped(super::refresh::MORPHED, move |_| {
                    on_morph.notify()
                });
                changes
            })
            .clone()
    })
}
