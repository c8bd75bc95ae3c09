//! Sign-in throttling. Every attempt is counted before its password is checked, in one step
//! with the check of the budgets, so concurrent guesses cannot all slip through before any
//! is counted. Two budgets per window: a small one per (username, address), the guesses at
//! one account from one place, and a larger one per address, so that one person's typos
//! behind an office's shared address lock out nobody else there. There is deliberately no
//! budget per username alone: anyone could spend it and lock a person out from everywhere;
//! a guess from many addresses still meets each address's budget and the bound on how many
//! passwords are hashed at once (see `PasswordHasher`).
//!
//! The counts live in the process (behind a load balancer each process counts on its own,
//! which multiplies the allowance by the number of processes but never removes it) and in
//! bounded memory: past `max_entries`, the oldest windows are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many attempts fit in a window.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Failed sign-ins per (username, address).
    pub per_name_and_address: u32,
    /// Failed sign-ins per address, whatever the username.
    pub per_address: u32,
    /// How long attempts are remembered.
    pub window: Duration,
    /// The most windows remembered at once.
    pub max_entries: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            per_name_and_address: 5,
            per_address: 50,
            window: Duration::from_secs(15 * 60),
            max_entries: 100_000,
        }
    }
}

/// One key's window: attempts counted (and not refunded), refusals, and when it began.
#[derive(Debug, Clone, Copy)]
struct Window {
    attempts: u32,
    refused: u64,
    since: Instant,
}

#[derive(Debug, Default)]
struct Windows {
    by_key: HashMap<String, Window>,
    /// Keys in the order their windows began, to forget the oldest first.
    order: VecDeque<(Instant, String)>,
}

/// Sign-in attempts per (username, address) and per address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    budgets: Budgets,
    windows: Mutex<Windows>,
}

/// An attempt counted against its budgets; given back with [`LoginThrottle::refund`] when it
/// turned out not to be a failed guess.
#[derive(Debug)]
#[must_use = "a reservation is refunded unless the attempt failed"]
pub struct Reservation {
    keys: Vec<String>,
}

/// An attempt refused: when to try again, and how many attempts this window has refused so
/// far, this one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub retry_after: Duration,
    pub refused: u64,
}

impl LoginThrottle {
    pub fn new(budgets: Budgets) -> Self {
        Self {
            budgets,
            windows: Mutex::default(),
        }
    }

    /// Counts a sign-in attempt against its budgets, or refuses it if one is spent.
    pub fn attempt(
        &self,
        username: &str,
        address: Option<IpAddr>,
        now: Instant,
    ) -> Result<Reservation, Refusal> {
        let mut keys = vec![(
            pair_key(username, address),
            self.budgets.per_name_and_address,
        )];
        if let Some(address) = address {
            keys.push((format!("ip:{address}"), self.budgets.per_address));
        }
        let mut windows = self.lock();
        windows.forget_before(now.checked_sub(self.budgets.window));
        let spent = keys.iter().find_map(|(key, budget)| {
            let window = windows.by_key.get(key)?;
            (window.attempts >= *budget).then_some(key.clone())
        });
        if let Some(key) = spent {
            let window = windows.by_key.get_mut(&key).expect("found above");
            window.refused += 1;
            return Err(Refusal {
                retry_after: (window.since + self.budgets.window).saturating_duration_since(now),
                refused: window.refused,
            });
        }
        for (key, _) in &keys {
            windows.count(key, now, self.budgets.max_entries);
        }
        Ok(Reservation {
            keys: keys.into_iter().map(|(key, _)| key).collect(),
        })
    }

    /// Gives back an attempt that was not a failed guess: a success (which also forgets the
    /// failures of that username from that address), or a failure of the server.
    pub fn refund(&self, reservation: Reservation, succeeded: bool) {
        let mut windows = self.lock();
        for (index, key) in reservation.keys.iter().enumerate() {
            let pair = index == 0;
            if pair && succeeded {
                windows.by_key.remove(key);
            } else if let Some(window) = windows.by_key.get_mut(key) {
                window.attempts = window.attempts.saturating_sub(1);
            }
        }
    }

    /// How many windows are remembered now.
    pub fn remembered(&self) -> usize {
        self.lock().by_key.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Windows> {
        // Each change leaves the maps consistent, so a panic elsewhere spoils nothing.
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn pair_key(username: &str, address: Option<IpAddr>) -> String {
    match address {
        Some(address) => format!("user:{username}@{address}"),
        None => format!("user:{username}"),
    }
}

impl Windows {
    /// Forgets the windows that began at `cutoff` or before: they have passed.
    fn forget_before(&mut self, cutoff: Option<Instant>) {
        let Some(cutoff) = cutoff else { return };
        while let Some((since, _)) = self.order.front() {
            if *since > cutoff {
                break;
            }
            let (since, key) = self.order.pop_front().expect("a front exists");
            self.forget_if_began(&key, since);
        }
    }

    /// Forgets `key` if its window is the one that began at `since` (a key whose window was
    /// forgotten and begun again is queued anew).
    fn forget_if_began(&mut self, key: &str, since: Instant) {
        if self
            .by_key
            .get(key)
            .is_some_and(|window| window.since == since)
        {
            self.by_key.remove(key);
        }
    }

    /// Counts one attempt of `key`, beginning its window if it has none; past `max_entries`
    /// windows, forgets the oldest.
    fn count(&mut self, key: &str, now: Instant, max_entries: usize) {
        if let Some(window) = self.by_key.get_mut(key) {
            window.attempts += 1;
            return;
        }
        while self.by_key.len() >= max_entries {
            let Some((since, oldest)) = self.order.pop_front() else {
                break;
            };
            self.forget_if_began(&oldest, since);
        }
        let window = Window {
            attempts: 1,
            refused: 0,
            since: now,
        };
        self.by_key.insert(key.to_owned(), window);
        self.order.push_back((now, key.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn address(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    fn throttle() -> LoginThrottle {
        LoginThrottle::new(Budgets {
            per_name_and_address: 3,
            per_address: 5,
            window: Duration::from_secs(60),
            max_entries: 100,
        })
    }

    #[test]
    fn a_pair_is_refused_once_its_budget_is_spent_until_the_window_passes() {
        let throttle = throttle();
        let start = Instant::now();
        for n in 0..3 {
            assert!(
                throttle.attempt("ada", address(1), start).is_ok(),
                "attempt {n}"
            );
        }
        let refused = throttle
            .attempt("ada", address(1), start + Duration::from_secs(10))
            .unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(50));
        assert_eq!(refused.refused, 1);
        let again = throttle.attempt("ada", address(1), start + Duration::from_secs(11));
        assert_eq!(again.unwrap_err().refused, 2, "refusals are counted");
        assert!(
            throttle.attempt("ada", address(2), start).is_ok(),
            "another address"
        );
        let later = start + Duration::from_secs(60);
        assert!(
            throttle.attempt("ada", address(1), later).is_ok(),
            "a new window"
        );
    }

    #[test]
    fn an_address_has_a_larger_budget_shared_by_its_names() {
        let throttle = throttle();
        let now = Instant::now();
        for name in ["a", "b", "c", "d", "e"] {
            assert!(throttle.attempt(name, address(1), now).is_ok(), "{name}");
        }
        assert!(
            throttle.attempt("f", address(1), now).is_err(),
            "the address is spent"
        );
        assert!(throttle.attempt("f", address(2), now).is_ok());
    }

    #[test]
    fn a_success_clears_its_pair_and_gives_back_the_address_attempt() {
        let throttle = throttle();
        let now = Instant::now();
        let _ = throttle.attempt("ada", address(1), now).unwrap();
        let _ = throttle.attempt("ada", address(1), now).unwrap();
        let third = throttle.attempt("ada", address(1), now).unwrap();
        throttle.refund(third, true);
        for n in 0..3 {
            assert!(
                throttle.attempt("ada", address(1), now).is_ok(),
                "after success {n}"
            );
        }
    }

    #[test]
    fn concurrent_guesses_never_exceed_the_budget() {
        let throttle = Arc::new(throttle());
        let now = Instant::now();
        let allowed: usize = std::thread::scope(|scope| {
            let guesses: Vec<_> = (0..32)
                .map(|_| {
                    let throttle = throttle.clone();
                    scope.spawn(move || throttle.attempt("ada", address(1), now).is_ok() as usize)
                })
                .collect();
            guesses.into_iter().map(|guess| guess.join().unwrap()).sum()
        });
        assert_eq!(allowed, 3);
    }

    #[test]
    fn memory_is_bounded_by_forgetting_the_oldest_windows() {
        let throttle = throttle();
        let start = Instant::now();
        for n in 0..1000u32 {
            let name = format!("user{n}");
            let at = start + Duration::from_millis(u64::from(n));
            let _ = throttle.attempt(&name, None, at);
        }
        assert!(throttle.remembered() <= 100, "{}", throttle.remembered());
        let newest = start + Duration::from_millis(999);
        for _ in 0..2 {
            let _ = throttle.attempt("user999", None, newest);
        }
        assert!(
            throttle.attempt("user999", None, newest).is_err(),
            "the newest windows are kept"
        );
    }
}
