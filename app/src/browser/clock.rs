//! Relative times ("3 min ago") age on screen: every 15 s each `<time data-relative>` is
//! rewritten from its `datetime`, the way the server wrote it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use leptos::prelude::set_interval_with_handle;
use wasm_bindgen::JsCast;

use crate::components::relative;

const EVERY: Duration = Duration::from_secs(15);

/// Starts the clock (once per page: the live indicator starts it).
pub fn start() {
    let _ = set_interval_with_handle(age_all, EVERY);
}

fn age_all() {
    let Some(document) = web_sys::window().and_then(|window| window.document()) else {
        return;
    };
    let Ok(times) = document.query_selector_all("time[data-relative]") else {
        return;
    };
    let now = Utc::now();
    for node in (0..times.length()).filter_map(|index| times.item(index)) {
        let at = node
            .dyn_ref::<web_sys::Element>()
            .and_then(|time| time.get_attribute("datetime"))
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok());
        if let Some(at) = at {
            node.set_text_content(Some(&relative(at.with_timezone(&Utc), now)));
        }
    }
}
