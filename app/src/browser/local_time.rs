//! Chart times in the viewer's zone. The server renders them in UTC (`datetime` holds the
//! instant, `data-local` how it reads, see `crate::components::chart_time`); here each is
//! rewritten to local time, on load and after every refresh that morphs new UTC text in, and
//! the note under the charts says which zone they show.

use chrono::{DateTime, TimeDelta, Utc};
use leptos::prelude::window_event_listener_untyped;
use wasm_bindgen::JsCast;
use web_sys::Element;

use super::refresh::MORPHED;
use crate::components::{chart_time, zone_note};

/// Rewrites the page's chart times now and after each refresh (once per page: the
/// hydration mark calls it).
pub fn listen() {
    show();
    let handle = window_event_listener_untyped(MORPHED, |_| show());
    // The listener lives as long as the page.
    std::mem::forget(handle);
}

fn show() {
    let Some(document) = web_sys::window().and_then(|window| window.document()) else {
        return;
    };
    if let Ok(times) = document.query_selector_all("[data-local][datetime]") {
        for element in (0..times.length())
            .filter_map(|index| times.item(index))
            .filter_map(|node| node.dyn_into::<Element>().ok())
        {
            localize(&element);
        }
    }
    if let Ok(Some(note)) = document.query_selector("[data-chart-times]") {
        note.set_text_content(Some(&zone_note(offset_minutes(Utc::now()))));
    }
}

fn localize(element: &Element) {
    let Some(at) = element
        .get_attribute("datetime")
        .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
        .map(|at| at.to_utc())
    else {
        return;
    };
    let kind = element.get_attribute("data-local").unwrap_or_default();
    let offset = offset_minutes(at);
    let local = (at + TimeDelta::minutes(i64::from(offset))).naive_utc();
    // Full times say "UTC" when they are, as the server wrote them.
    let zone = if offset == 0 && kind == "datetime" {
        " UTC"
    } else {
        ""
    };
    let after = element.get_attribute("data-after").unwrap_or_default();
    element.set_text_content(Some(&format!("{}{zone}{after}", chart_time(local, &kind))));
}

/// The viewer's offset east of UTC at `at`, in minutes (daylight saving time included).
fn offset_minutes(at: DateTime<Utc>) -> i32 {
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
        at.timestamp_millis() as f64
    ));
    -(date.get_timezone_offset() as i32)
}
