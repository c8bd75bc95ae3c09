//! Login throttling: after five failed sign-ins within fifteen minutes, for one username or
//! from one address, further attempts are refused until the window has passed — without
//! checking the password, so guessing costs the attacker time and the server nothing.
//!
//! The counts live in the process: behind a load balancer each process counts on its own,
//! which multiplies the allowance by the number of processes but never removes it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed per window.
pub const MAX_FAILURES: u32 = 5;
/// How long failures are remembered.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    since: Instant,
}

/// Failed sign-ins per username and per address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<String, Failures>>,
}

impl LoginThrottle {
    /// How long the caller must wait, if any of `keys` has used up its failures.
    pub fn retry_after(&self, keys: &[String], now: Instant) -> Option<Duration> {
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.iter()
            .filter_map(|key| failures.get(key))
            .filter(|f| f.count >= MAX_FAILURES && now < f.since + WINDOW)
            .map(|f| f.since + WINDOW - now)
            .max()
    }

    /// Counts a failed sign-in against every key.
    pub fn record_failure(&self, keys: &[String], now: Instant) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Forget windows that have passed, so the map stays as small as the attack.
        failures.retain(|_, f| now < f.since + WINDOW);
        for key in keys {
            let entry = failures.entry(key.clone()).or_insert(Failures {
                count: 0,
                since: now,
            });
            entry.count += 1;
        }
    }

    /// A successful sign-in clears the username's failures (not the address's).
    pub fn record_success(&self, username_key: &str) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        failures.remove(username_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_until_the_window_has_passed() {
        let throttle = LoginThrottle::default();
        let keys = ["user:ada".to_owned(), "ip:10.0.0.1".to_owned()];
        let start = Instant::now();
        for n in 0..MAX_FAILURES {
            assert_eq!(throttle.retry_after(&keys, start), None, "attempt {n}");
            throttle.record_failure(&keys, start);
        }
        let locked = throttle.retry_after(&keys, start + Duration::from_secs(60));
        assert_eq!(locked, Some(WINDOW - Duration::from_secs(60)));
        assert_eq!(throttle.retry_after(&keys, start + WINDOW), None);
    }

    #[test]
    fn each_key_counts_on_its_own_and_success_clears_the_user() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for _ in 0..MAX_FAILURES {
            throttle.record_failure(&["user:ada".to_owned(), "ip:1".to_owned()], now);
        }
        assert!(throttle
            .retry_after(&["user:bob".to_owned(), "ip:2".to_owned()], now)
            .is_none());
        assert!(throttle
            .retry_after(&["user:bob".to_owned(), "ip:1".to_owned()], now)
            .is_some());
        throttle.record_success("user:ada");
        assert!(throttle
            .retry_after(&["user:ada".to_owned(), "ip:2".to_owned()], now)
            .is_none());
    }
}
