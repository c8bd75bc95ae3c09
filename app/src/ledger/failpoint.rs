//! Failpoints for the fault-injection tests: `IDEM_FAILPOINT=<name>` makes the process stop
//! dead at that point (it waits forever, so a test can kill it there with SIGKILL). Unset —
//! always, outside those tests — each check is one read of a value computed once.

use std::sync::OnceLock;

/// The variable that arms a failpoint.
pub const FAILPOINT_VARIABLE: &str = "IDEM_FAILPOINT";

fn armed() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| std::env::var(FAILPOINT_VARIABLE).ok())
        .as_deref()
}

/// Never returns if the failpoint `name` is armed.
pub async fn pause_if_armed(name: &str) {
    if armed() == Some(name) {
        tracing::error!(failpoint = name, "failpoint reached: pausing forever");
        std::future::pending::<()>().await;
    }
}
