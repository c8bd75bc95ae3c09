//! Fetching the page again and morphing it into the document: after a change the ledger
//! announced ([`soon`], coalesced), after a person's own action ([`now`]), and to move to
//! another page without a reload ([`go`]).
//!
//! A fetch that fails (the server is down or overloaded) is tried again after a pause that
//! doubles with each failure in a row, up to [`LONGEST_PAUSE_MS`]: every dashboard left open
//! would otherwise ask a struggling server for its page every second.

use std::cell::Cell;

use js_sys::{Function, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Document, DomParser, Element, RequestInit, Response, SupportedType};

use super::morph::{islands, morph_children};

/// The event sent to the window once a fetched page is morphed in: what a person did not do
/// may have changed (rows came or went), so what is derived from the page should look again.
pub const MORPHED: &str = "idem:morphed";

thread_local! {
    /// A change was announced and the page has not been fetched since.
    static DIRTY: Cell<bool> = const { Cell::new(false) };
    /// A fetch is under way; another one waits for it (as [`DIRTY`]).
    static IN_FLIGHT: Cell<bool> = const { Cell::new(false) };
    /// Fetches that failed in a row since the last one that did not.
    static FAILURES: Cell<u32> = const { Cell::new(0) };
    /// No fetch of a change before this time (`Date.now()`, ms), after failures.
    static PAUSED_UNTIL: Cell<f64> = const { Cell::new(0.0) };
}

/// The pause after the first failure; it doubles with each further one.
const FIRST_PAUSE_MS: f64 = 1_000.0;
/// The longest pause between two tries while fetches keep failing.
pub const LONGEST_PAUSE_MS: f64 = 30_000.0;

/// Something changed: the page is fetched again at the next [`tick`].
pub fn soon() {
    DIRTY.with(|dirty| dirty.set(true));
}

/// The server answers again (its change stream reopened): whatever changed meanwhile is
/// fetched at the next [`tick`], whatever pause failed fetches asked for.
pub fn reachable_again() {
    settled();
    soon();
}

/// Called once a second: fetches the page if something changed since the last fetch, unless
/// failures asked for a pause.
pub fn tick() {
    let paused = PAUSED_UNTIL.with(|until| js_sys::Date::now() < until.get());
    if DIRTY.with(|dirty| dirty.get()) && !paused {
        now();
    }
}

/// Fetches the page now (after a person's action, whose effect should show at once).
pub fn now() {
    DIRTY.with(|dirty| dirty.set(false));
    if IN_FLIGHT.with(|busy| busy.replace(true)) {
        // The fetch under way may have started before this change: fetch again after it.
        soon();
        return;
    }
    leptos::task::spawn_local(async {
        match fetch_page(&location_href()).await {
            Ok(fetched) => {
                settled();
                if fetched.redirected {
                    // Redirected (the session ended, say): go there for real.
                    assign(&fetched.url);
                } else {
                    apply(&fetched.page);
                }
            }
            Err(_) => {
                pause_after_failure();
                soon();
            }
        }
        IN_FLIGHT.with(|busy| busy.set(false));
    });
}

/// Moves to `path` without reloading: fetches it, morphs it in and puts its address in place
/// of the current one (signing in: the login page should not come back with "Back").
pub fn go(path: &str) {
    let path = path.to_owned();
    leptos::task::spawn_local(async move {
        match fetch_page(&path).await {
            Ok(fetched) => {
                apply(&fetched.page);
                if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
                    let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&fetched.url));
                }
            }
            Err(_) => assign(&path),
        }
    });
}

/// A page fetched for the document.
struct Fetched {
    page: Document,
    /// The address it came from, after redirects.
    url: String,
    /// Whether the server sent the fetch elsewhere (to the login page, say).
    redirected: bool,
}

/// The page at `url`; a server error (5xx) or a failed fetch is an error.
async fn fetch_page(url: &str) -> Result<Fetched, JsValue> {
    let window = web_sys::window().ok_or(JsValue::NULL)?;
    let init = RequestInit::new();
    let headers = web_sys::Headers::new()?;
    headers.set("accept", "text/html")?;
    init.set_headers(&headers);
    let response: Response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
        .await?
        .dyn_into()?;
    if response.status() >= 500 {
        return Err(JsValue::from(response.status()));
    }
    let html = JsFuture::from(response.text()?)
        .await?
        .as_string()
        .unwrap_or_default();
    let page = DomParser::new()?.parse_from_string(&html, SupportedType::TextHtml)?;
    Ok(Fetched {
        page,
        url: response.url(),
        redirected: response.redirected(),
    })
}

/// A fetch came back: changes are fetched again as soon as they come.
fn settled() {
    FAILURES.with(|failures| failures.set(0));
    PAUSED_UNTIL.with(|until| until.set(0.0));
}

/// A fetch failed: the next try of a change waits, twice as long as after the failure before.
fn pause_after_failure() {
    let failures = FAILURES.with(|failures| {
        failures.set(failures.get().saturating_add(1));
        failures.get()
    });
    let doublings = failures.saturating_sub(1).min(16);
    let pause = (FIRST_PAUSE_MS * f64::from(1u32 << doublings)).min(LONGEST_PAUSE_MS);
    PAUSED_UNTIL.with(|until| until.set(js_sys::Date::now() + pause));
}

/// Morphs `page`'s body into the document's, then hydrates the islands that are new.
fn apply(page: &Document) {
    let Some(document) = web_sys::window().and_then(|window| window.document()) else {
        return;
    };
    let (Some(body), Some(new_body)) = (document.body(), page.body()) else {
        return;
    };
    let before = islands();
    morph_children(&body, &new_body);
    let fresh = islands()
        .into_iter()
        .filter(|island| !before.iter().any(|old| old.is_same_node(Some(island))));
    for island in fresh {
        hydrate_island(&island);
    }
    if let (Some(window), Ok(morphed)) = (web_sys::window(), web_sys::Event::new(MORPHED)) {
        let _ = window.dispatch_event(&morphed);
    }
}

/// Hands an island to the function the islands script left for it (`__hydrateIsland`).
fn hydrate_island(island: &Element) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let Ok(hydrate) = Reflect::get(&window, &JsValue::from_str("__hydrateIsland")) else {
        return;
    };
    if let Some(hydrate) = hydrate.dyn_ref::<Function>() {
        let component = island.get_attribute("data-component").unwrap_or_default();
        let _ = hydrate.call2(&JsValue::NULL, island, &JsValue::from_str(&component));
    }
}

/// The page's address without its fragment, as a fetch's response names it.
fn location_href() -> String {
    let href = web_sys::window()
        .and_then(|window| window.location().href().ok())
        .unwrap_or_default();
    match href.split_once('#') {
        Some((page, _)) => page.to_owned(),
        None => href,
    }
}

fn assign(url: &str) {
    if let Some(window) = web_sys::window() {
        let _ = window.location().assign(url);
    }
}
