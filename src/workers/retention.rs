//! Retention: deletes operations kept `retention` past their `expires_at`, with their events,
//! and expired sessions. Each round is one small transaction, so the writer is free between
//! them; rounds follow each other until nothing is left, then the worker sleeps.

use chrono::{TimeDelta, Utc};
use std::time::Duration;

use super::{stopped, StopSignal};
use crate::storage::{Database, Purged, RetentionRound};

/// Rows of each kind deleted per transaction.
pub const RETENTION_BATCH: i64 = 200;

/// The retention worker of one process.
#[derive(Clone)]
pub struct Retention {
    database: Database,
    retention: TimeDelta,
    interval: Duration,
}

impl Retention {
    /// A worker that keeps operations `retention` past their expiry and looks every `interval`.
    pub fn new(database: Database, retention: TimeDelta, interval: Duration) -> Self {
        Self {
            database,
            retention,
            interval,
        }
    }

    /// Deletes everything due now, round after round; returns the totals.
    pub async fn run_once(&self) -> Purged {
        let mut total = Purged::default();
        loop {
            let now = Utc::now();
            let round = RetentionRound {
                expired_before: now - self.retention,
                now,
                batch: RETENTION_BATCH,
            };
            match self.database.purge_round(&round).await {
                Ok(purged) if purged.any() => {
                    total.operations += purged.operations;
                    total.events += purged.events;
                    total.sessions += purged.sessions;
                    // Let waiting writes in between rounds.
                    tokio::task::yield_now().await;
                }
                Ok(_) => return total,
                Err(error) => {
                    tracing::warn!(%error, "retention failed; retrying next round");
                    return total;
                }
            }
        }
    }

    /// Runs until the stop signal fires.
    pub async fn run(self, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            let purged = self.run_once().await;
            if purged.any() {
                tracing::info!(?purged, "retention deleted expired rows");
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}
