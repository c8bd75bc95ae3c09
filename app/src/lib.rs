//! idem's application crate: the rules (behind the `ssr` feature) and the Leptos UI, which is
//! compiled both for the server (`ssr`) and for the browser (`hydrate`).

pub mod domain;
mod error;
mod pages;
pub mod server_fns;
mod shell;

#[cfg(feature = "ssr")]
pub mod audit;
#[cfg(feature = "ssr")]
pub mod identity;
#[cfg(feature = "ssr")]
pub mod ledger;
#[cfg(feature = "ssr")]
pub mod store_error;

pub use error::UiError;
pub use shell::{shell, App};
