//! The lease reaper: a lease that runs out with no report turns its operation `unknown`
//! (for tools whose calls must not be repeated), even when no claim comes to notice it, so
//! operators and reconciliation see it. Claims apply the same rule when they find one first.

use app::ledger::Ledger;
use std::time::Duration;

use super::{stopped, StopSignal};

/// How many expired leases one round handles at most.
const BATCH: u32 = 100;

/// The lease reaper of one process. On PostgreSQL several processes run it at once; the
/// store's `skip locked` keeps them off each other's rows.
#[derive(Clone)]
pub struct LeaseReaper {
    ledger: Ledger,
    interval: Duration,
}

impl LeaseReaper {
    /// A reaper that looks every `interval`.
    pub fn new(ledger: Ledger, interval: Duration) -> Self {
        Self { ledger, interval }
    }

    /// Expires what is due now; returns how many operations became `unknown`.
    pub async fn run_once(&self) -> usize {
        app::ledger::failpoint::panic_if_armed("lease_reaper_round");
        let mut total = 0;
        loop {
            match self.ledger.expire_leases(BATCH).await {
                Ok(count) => {
                    total += count;
                    if count < BATCH as usize {
                        return total;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "lease reaper round failed; retrying next round");
                    return total;
                }
            }
        }
    }

    /// Runs rounds until the stop signal fires.
    pub async fn run(self, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            let expired = self.run_once().await;
            if expired > 0 {
                tracing::info!(expired, "leases ran out: operations are now unknown");
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}
