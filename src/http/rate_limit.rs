//! The per-API-key rate limit: each key may make `per_second` requests on average, with
//! bursts of up to `burst`; beyond that, `429 too_many_requests` with `Retry-After`.
//!
//! The limiter is governor's keyed GCRA limiter (the engine of `tower_governor`), consulted by
//! the agent extractor once the key is authenticated, rather than `tower_governor`'s layer
//! in front of the router: that layer must find a key in every request (people and
//! anonymous callers have none, and would share one bucket or be refused), and it would key
//! on the unauthenticated header, so invented tokens would each get a bucket. Keyed by the
//! key's id, the limiter holds one small state per live key. Counts are per process.

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::Arc;
use uuid::Uuid;

use super::error::{ApiError, ApiResult};

/// The rate limit of API keys; cheap to clone. Off when built with a rate of 0.
#[derive(Clone)]
pub struct KeyRateLimit {
    limiter: Option<Arc<DefaultKeyedRateLimiter<Uuid>>>,
}

impl KeyRateLimit {
    /// A limit of `per_second` requests per key on average and `burst` at once; `per_second`
    /// 0 turns it off (as does `burst` 0).
    pub fn new(per_second: u32, burst: u32) -> Self {
        let quota = NonZeroU32::new(per_second)
            .zip(NonZeroU32::new(burst))
            .map(|(rate, burst)| Quota::per_second(rate).allow_burst(burst));
        Self::with_quota(quota)
    }

    fn with_quota(quota: Option<Quota>) -> Self {
        Self {
            limiter: quota.map(|quota| Arc::new(RateLimiter::keyed(quota))),
        }
    }

    /// Counts one request of the key; `TooManyRequests` when it is over its limit.
    pub fn check(&self, key_id: Uuid) -> ApiResult<()> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(&key_id).map_err(|not_until| {
            let wait = not_until.wait_time_from(limiter.clock().now());
            // Rounded up: a client that waits as told is served.
            let retry_after_seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
            ApiError::TooManyRequests {
                message: format!(
                    "this API key is over its rate limit; try again in {retry_after_seconds} s"
                ),
                retry_after_seconds,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_over_its_burst_is_refused_while_another_key_is_served() {
        // Two an hour: nothing is replenished while the test runs, however slow the machine.
        let two = NonZeroU32::new(2).unwrap();
        let limit = KeyRateLimit::with_quota(Some(Quota::per_hour(two)));
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(limit.check(first).is_ok());
        assert!(limit.check(first).is_ok());
        match limit.check(first) {
            Err(ApiError::TooManyRequests {
                retry_after_seconds,
                ..
            }) => assert!(
                (1..=1800).contains(&retry_after_seconds),
                "{retry_after_seconds}"
            ),
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(limit.check(second).is_ok(), "each key has its own bucket");
    }

    #[test]
    fn a_rate_of_zero_turns_the_limit_off() {
        let limit = KeyRateLimit::new(0, 1);
        let key = Uuid::now_v7();
        for _ in 0..100 {
            assert!(limit.check(key).is_ok());
        }
    }
}
