//! idem's application crate: the rules (behind the `ssr` feature) and the Leptos UI, which is
//! compiled both for the server (`ssr`) and for the browser (`hydrate`).

// Deeply nested views make deeply nested types; the compiler needs more room to lay them out.
#![recursion_limit = "256"]

mod components;
pub mod domain;
mod error;
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
pub use shell::{shell, App};
