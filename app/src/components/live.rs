//! Live updates: the browser listens to the ledger's change stream
//! (`GET /v1/operations/changes`, server-sent events) and pages refetch what they show when
//! something changed. Changes are coalesced to at most one refetch per second, so a busy
//! ledger does not turn every open dashboard into a request storm.

use leptos::prelude::*;

/// The shared state of the change stream, provided once by the app.
#[derive(Debug, Clone, Copy)]
pub struct Live {
    /// Goes up by one per coalesced batch of changes; pages track it to refetch.
    version: RwSignal<u64>,
    /// Whether the stream is open right now.
    connected: RwSignal<bool>,
    /// Set once a signed-in page is shown: only then may the stream be opened.
    wanted: RwSignal<bool>,
}

impl Live {
    /// Creates the state and, in the browser, opens the stream once someone is signed in.
    pub fn provide() {
        let live = Live {
            version: RwSignal::new(0),
            connected: RwSignal::new(false),
            wanted: RwSignal::new(false),
        };
        provide_context(live);
        #[cfg(feature = "hydrate")]
        browser::start(live);
    }

    /// Tracks the change counter: a resource whose source calls this refetches on changes.
    pub fn version(&self) -> u64 {
        self.version.get()
    }

    /// Whether the stream is connected (tracked).
    pub fn is_connected(&self) -> bool {
        self.connected.get()
    }

    /// A signed-in page is on screen: the stream may open.
    pub fn signed_in(&self) {
        if !self.wanted.get_untracked() {
            self.wanted.set(true);
        }
    }
}

/// The app's change stream.
pub fn use_live() -> Live {
    expect_context::<Live>()
}

/// Holds a page's live refetches back until its content has hydrated. A resource whose
/// source changes while the content it feeds is still hydrating (a change arrives in the
/// first second) makes the browser draw something else over the server's HTML, which
/// breaks hydration; so the source reads [`LiveGate::version`], which stays 0 (as on the
/// server) until [`LiveGate::open_once_drawn`] has run in the browser.
#[derive(Debug, Clone, Copy)]
pub struct LiveGate {
    open: RwSignal<bool>,
    live: Live,
}

impl LiveGate {
    /// A closed gate on the app's change stream.
    pub fn new() -> Self {
        Self {
            open: RwSignal::new(false),
            live: use_live(),
        }
    }

    /// The change counter once the gate is open (tracked), 0 before.
    pub fn version(&self) -> u64 {
        if self.open.get() {
            self.live.version()
        } else {
            0
        }
    }

    /// Call inside the content the resource feeds: opens the gate once that content is
    /// live in the browser (effects never run on the server).
    pub fn open_once_drawn(&self) {
        let open = self.open;
        Effect::new(move |_| open.set(true));
    }

    /// Whether the content is live in the browser (tracked); tests wait for it.
    pub fn is_open(&self) -> bool {
        self.open.get()
    }
}

impl Default for LiveGate {
    fn default() -> Self {
        Self::new()
    }
}

/// "Live" when the change stream is connected, "Offline" when not.
#[component]
pub fn LiveIndicator() -> impl IntoView {
    let live = use_live();
    view! {
        <span
            class="live"
            class:connected=move || live.is_connected()
            data-testid="live-indicator"
            title=move || {
                if live.is_connected() {
                    "Connected: changes appear without reloading"
                } else {
                    "Not connected to the change stream; retrying"
                }
            }
        >
            <span class="dot" aria-hidden="true"></span>
            {move || if live.is_connected() { "Live" } else { "Offline" }}
        </span>
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use super::Live;
    use leptos::prelude::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::Duration;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;
    use web_sys::EventSource;

    const STREAM: &str = "/v1/operations/changes";
    const COALESCE: Duration = Duration::from_secs(1);
    /// A stream the server closed for good (a 401 after sign-out, a restart) is reopened
    /// after this pause, while someone is still signed in.
    const REOPEN_AFTER: Duration = Duration::from_secs(5);

    pub(super) fn start(live: Live) {
        let dirty = Rc::new(Cell::new(false));
        {
            let dirty = dirty.clone();
            let _ = set_interval_with_handle(
                move || {
                    if dirty.replace(false) {
                        live.version.update(|version| *version += 1);
                    }
                },
                COALESCE,
            );
        }
        let opened = Rc::new(Cell::new(false));
        Effect::new(move |_| {
            if live.wanted.get() && !opened.replace(true) {
                open(live, dirty.clone(), false);
            }
        });
    }

    /// Opens the stream; `catch_up` when it replaces one that closed (see `on_open`).
    fn open(live: Live, dirty: Rc<Cell<bool>>, catch_up: bool) {
        let Ok(source) = EventSource::new(STREAM) else {
            live.connected.set(false);
            return;
        };
        let catch_up = Cell::new(catch_up);
        let on_open = Closure::<dyn FnMut()>::new(move || {
            live.connected.set(true);
            // After an outage, whatever changed while the stream was down is fetched now.
            // Not on the first opening: the page's data was read just before, and a refetch
            // while the page's content is still hydrating leaves that content dead.
            if catch_up.replace(true) {
                live.version.update(|version| *version += 1);
            }
        });
        let on_change = {
            let dirty = dirty.clone();
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |_| dirty.set(true))
        };
        let on_error = {
            let source = source.clone();
            Closure::<dyn FnMut()>::new(move || {
                live.connected.set(false);
                if source.ready_state() == EventSource::CLOSED {
                    let dirty = dirty.clone();
                    set_timeout(move || open(live, dirty, true), REOPEN_AFTER);
                }
            })
        };
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let _ = source
            .add_event_listener_with_callback("operation", on_change.as_ref().unchecked_ref());
        // The stream lives as long as the page; its handlers must too.
        on_open.forget();
        on_change.forget();
        on_error.forget();
    }
}
