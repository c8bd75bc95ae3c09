//! Live updates: the live indicator is the island that keeps a signed-in page current. In the
//! browser it opens the ledger's change stream and the clock that ages relative times (see
//! `crate::browser`); it shows whether the stream is connected.

use leptos::prelude::*;

/// "Live" when the change stream is connected, "Offline" when not.
#[island]
pub fn LiveIndicator() -> impl IntoView {
    let connected = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    start_once(connected);
    view! {
        <span
            class="live"
            class:connected=move || connected.get()
            data-testid="live-indicator"
            title=move || {
                if connected.get() {
                    "Connected: changes appear without reloading"
                } else {
                    "Not connected to the change stream; retrying"
                }
            }
        >
            <span class="dot" aria-hidden="true"></span>
            {move || if connected.get() { "Live" } else { "Offline" }}
        </span>
    }
}

/// One stream and one clock per page, however often the indicator is hydrated.
#[cfg(feature = "hydrate")]
fn start_once(connected: RwSignal<bool>) {
    thread_local! {
        static STARTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !STARTED.with(|started| started.replace(true)) {
        crate::browser::stream::start(connected);
        crate::browser::clock::start();
    }
}
