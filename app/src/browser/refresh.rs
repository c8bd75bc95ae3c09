//! Fetching the page again and morphing it into the document: after a change the ledger
//! announced ([`soon`], coalesced), after a person's own action ([`now`]), and to move to
//! another page without a reload ([`go`]).

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
}

/// Something changed: the page is fetched again at the next [`tick`].
pub fn soon() {
    DIRTY.with(|dirty| dirty.set(true));
}

/// Called once a second: fetches the page if something changed since the last fetch.
pub fn tick() {
    if DIRTY.with(|dirty| dirty.get()) {
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
        let here = location_href();
        match fetch_page(&here).await {
            // Redirected (the session ended, say): go there for real.
            Ok((url, _)) if url != here => assign(&url),
            Ok((_, page)) => apply(&page),
            Err(_) => soon(),
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
            Ok((url, page)) => {
                apply(&page);
                if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
                    let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url));
                }
            }
            Err(_) => assign(&path),
        }
    });
}

/// The page at `url` as a document, and the address it came from after redirects.
async fn fetch_page(url: &str) -> Result<(String, Document), JsValue> {
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
    Ok((response.url(), page))
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
