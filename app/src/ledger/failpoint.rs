//! Failpoints for the fault-injection tests: `IDEM_FAILPOINT=<name>` arms the point `name`.
//! A pause point makes the process stop dead there (it waits forever, so a test can kill it
//! with SIGKILL); a panic point panics there, every time, or only the first `n` times when
//! armed as `<name>:<n>`. Unset — always, outside those tests — each check is one read of a
//! value computed once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The variable that arms a failpoint.
pub const FAILPOINT_VARIABLE: &str = "IDEM_FAILPOINT";

/// The armed point, and how many more times it fires (`None`: every time).
struct Armed {
    name: String,
    remaining: Option<AtomicU64>,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            std::env::var(FAILPOINT_VARIABLE)
                .ok()
                .map(|value| parse(&value))
        })
        .as_ref()
}

fn parse(value: &str) -> Armed {
    match value.rsplit_once(':') {
        Some((name, count)) if count.parse::<u64>().is_ok() => Armed {
            name: name.to_owned(),
            remaining: count.parse().ok().map(AtomicU64::new),
        },
        _ => Armed {
            name: value.to_owned(),
            remaining: None,
        },
    }
}

impl Armed {
    /// Whether the point `name` fires now (and counts the firing).
    fn fires(&self, name: &str) -> bool {
        if self.name != name {
            return false;
        }
        match &self.remaining {
            None => true,
            Some(remaining) => remaining
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                })
                .is_ok(),
        }
    }
}

/// Never returns if the failpoint `name` is armed.
pub async fn pause_if_armed(name: &str) {
    if armed().is_some_and(|armed| armed.fires(name)) {
        tracing::error!(failpoint = name, "failpoint reached: pausing forever");
        std::future::pending::<()>().await;
    }
}

/// Panics if the failpoint `name` is armed (and has firings left).
pub fn panic_if_armed(name: &str) {
    if armed().is_some_and(|armed| armed.fires(name)) {
        panic!("failpoint {name} reached: panicking");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_point_fires_that_many_times_and_no_other_point_fires() {
        let armed = parse("writer_batch:2");
        assert!(!armed.fires("reaper_round"));
        assert!(armed.fires("writer_batch"));
        assert!(armed.fires("writer_batch"));
        assert!(!armed.fires("writer_batch"));
    }

    #[test]
    fn an_uncounted_point_fires_every_time() {
        let armed = parse("invoke_after_execute");
        assert!((0..5).all(|_| armed.fires("invoke_after_execute")));
    }
}
