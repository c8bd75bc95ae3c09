//! The reconciler: `unknown` operations of tools with a `reconcile_url` are settled by asking
//! the provider whether it saw their key. A failed lookup is recorded and asked again later,
//! spaced out (5 s, 30 s, 2 min, 10 min, then hourly). On PostgreSQL several processes run it
//! at once: the store hands each due operation to one of them.

use app::ledger::Ledger;
use std::time::Duration;

use super::{stopped, StopSignal};

/// How many operations one round asks about at most.
const BATCH: u32 = 50;

/// The reconciler of one process.
#[derive(Clone)]
pub struct Reconciler {
    ledger: Ledger,
    interval: Duration,
}

impl Reconciler {
    /// A reconciler that looks every `interval`.
    pub fn new(ledger: Ledger, interval: Duration) -> Self {
        Self { ledger, interval }
    }

    /// Reconciles what is due now; returns how many operations were settled.
    pub async fn run_once(&self) -> usize {
        match self.ledger.reconcile_due(BATCH).await {
            Ok(round) => {
                if round.settled > 0 || round.failed > 0 {
                    tracing::info!(
                        settled = round.settled,
                        failed_lookups = round.failed,
                        "reconciliation round"
                    );
                }
                round.settled
            }
            Err(error) => {
                tracing::warn!(%error, "reconciliation round failed; retrying next round");
                0
            }
        }
    }

    /// Runs rounds until the stop signal fires.
    pub async fn run(self, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            self.run_once().await;
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}
