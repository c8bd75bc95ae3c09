//! idem: the server (behind `ssr`) and the browser entry point (behind `hydrate`).
//!
//! The server modules are in the library, not the binary, so that `tests/` can start the real
//! application on port 0.

#[cfg(feature = "ssr")]
pub mod cli;
#[cfg(feature = "ssr")]
pub mod config;
#[cfg(feature = "ssr")]
pub mod demo;
#[cfg(feature = "ssr")]
pub mod http;
#[cfg(feature = "ssr")]
pub mod mcp;
#[cfg(feature = "ssr")]
pub mod provider;
#[cfg(feature = "ssr")]
pub mod sandbox;
#[cfg(feature = "ssr")]
pub mod startup;
#[cfg(feature = "ssr")]
pub mod storage;
#[cfg(feature = "ssr")]
pub mod telemetry;
#[cfg(feature = "ssr")]
pub mod workers;

/// Called by the generated JavaScript once the WebAssembly is loaded; the islands script then
/// hydrates each island of the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    app::hydrate_islands();
}
