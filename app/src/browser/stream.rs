//! The ledger's change stream (`GET /v1/operations/changes`, server-sent events): each change
//! asks for the page again, coalesced to at most one fetch a second, so a busy ledger does
//! not turn every open dashboard into a request storm.

use std::time::Duration;

use leptos::prelude::*;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::EventSource;

use super::refresh;

const STREAM: &str = "/v1/operations/changes";
const COALESCE: Duration = Duration::from_secs(1);
/// A stream the server closed for good (a 401 after sign-out, a restart) is reopened after
/// this pause.
const REOPEN_AFTER: Duration = Duration::from_secs(5);

/// Opens the stream and the coalescing timer; `connected` follows the stream's state.
pub fn start(connected: RwSignal<bool>) {
    let _ = set_interval_with_handle(refresh::tick, COALESCE);
    open(connected, false);
}

/// Opens the stream; `catch_up` when it replaces one that closed (see `on_open`).
fn open(connected: RwSignal<bool>, catch_up: bool) {
    let Ok(source) = EventSource::new(STREAM) else {
        connected.set(false);
        return;
    };
    let catch_up = std::cell::Cell::new(catch_up);
    let on_open = Closure::<dyn FnMut()>::new(move || {
        connected.set(true);
        // After an outage, whatever changed while the stream was down is fetched now. Not
        // on the first opening: the page was rendered just before.
        if catch_up.replace(true) {
            refresh::reachable_again();
        }
    });
    let on_change = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(|_| refresh::soon());
    let on_error = {
        let source = source.clone();
        Closure::<dyn FnMut()>::new(move || {
            connected.set(false);
            if source.ready_state() == EventSource::CLOSED {
                set_timeout(move || open(connected, true), REOPEN_AFTER);
            }
        })
    };
    source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    let _ =
        source.add_event_listener_with_callback("operation", on_change.as_ref().unchecked_ref());
    // The stream lives as long as the page; its handlers must too.
    on_open.forget();
    on_change.forget();
    on_error.forget();
}
