//! Structured logs: human-readable by default, JSON lines with `IDEM_LOG_FORMAT=json`.

use std::io::IsTerminal;
use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber; the filter comes from `IDEM_LOG` (e.g. `info,idem=debug`).
/// Safe to call more than once (tests start many applications in one process).
pub fn init(json: bool) {
    let filter =
        EnvFilter::try_from_env("IDEM_LOG").unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}
