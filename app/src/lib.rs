//! idem's application crate: the rules (behind the `ssr` feature) and the Leptos UI, which is
//! compiled both for the server (`ssr`) and for the browser (`hydrate`).

// Deeply nested views make deeply nested types; the compiler needs more room to lay them out.
#![recursion_limit = "256"]

#[cfg(feature = "hydrate")]
mod browser;
mod components;
pub mod domain;
mod error;
pub mod operations_filter;
mod pages;
pub mod server_fns;
mod shell;
pub mod views;

#[cfg(feature = "ssr")]
pub mod admin_actions;
#[cfg(feature = "ssr")]
pub mod audit;
#[cfg(feature = "ssr")]
mod charts;
#[cfg(feature = "ssr")]
pub mod identity;
#[cfg(feature = "ssr")]
pub mod ledger;
#[cfg(feature = "ssr")]
pub mod people_actions;
#[cfg(feature = "ssr")]
pub mod read_cache;
#[cfg(feature = "ssr")]
pub mod store_error;

pub use error::UiError;

/// Takes over the server-rendered page in the browser: the islands script then hydrates each
/// island. Defined here, beside the islands, so that the browser build links this crate's
/// code (and with it every island's exported entry point).
#[cfg(feature = "hydrate")]
pub fn hydrate_islands() {
    leptos::mount::hydrate_islands();
}
pub use shell::{shell, App};
