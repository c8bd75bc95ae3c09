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

    /// Expires what is due now, round after round, until a round finds less than a batch or
    /// `stop` has fired; returns how many operations became `unknown`. A shutdown does not
    /// wait for a backlog (every lease of a long outage running out at once).
    pub async fn run_once(&self, stop: &StopSignal) -> usize {
        app::ledger::failpoint::panic_if_armed("lease_reaper_round");
        let mut total = 0;
        loop {
            if *stop.borrow() {
                return total;
            }
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
        let signal = stop.clone();
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            let expired = self.run_once(&signal).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::conformance::ledger::{request, start};
    use crate::storage::testing::{Backend, TestDatabase};
    use crate::storage::Database;

    #[tokio::test]
    async fn rounds_go_on_until_no_lease_is_due_unless_the_server_stops() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let database = Database::open(db.url()).await.unwrap();
        let store = database.ledger_store();
        let due = 2 * BATCH as usize + 1;
        for n in 0..due {
            // A lease of no time at all: over as soon as the claim commits.
            let mut order = request("billing", &format!("order-{n}"), "refund");
            order.policy.lease_seconds = 0;
            start(store.as_ref(), &order).await;
        }
        let reaper = LeaseReaper::new(Ledger::new(store), Duration::ZERO);
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        stop_sender.send(true).unwrap();
        assert_eq!(reaper.run_once(&stop).await, 0);

        let (_running, go_on) = tokio::sync::watch::channel(false);
        assert_eq!(reaper.run_once(&go_on).await, due);
        assert_eq!(reaper.run_once(&go_on).await, 0);
        database.close().await;
    }
}
