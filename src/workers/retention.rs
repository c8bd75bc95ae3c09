//! Retention: deletes operations kept `retention` past their `expires_at`, with their events,
//! and expired sessions. Each round is one small transaction, so the writer is free between
//! them; rounds follow each other until nothing is left or the server stops, then the worker
//! sleeps.

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

    /// Deletes everything due now, round after round, until nothing is left or `stop` has
    /// fired; returns the totals. A backlog (a first start after a long outage, a shortened
    /// retention) takes minutes of rounds, which a shutdown does not wait for.
    pub async fn run_once(&self, stop: &StopSignal) -> Purged {
        let mut total = Purged::default();
        loop {
            if *stop.borrow() {
                return total;
            }
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
        let signal = stop.clone();
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            let purged = self.run_once(&signal).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::conformance::ledger::{request, start};
    use crate::storage::conformance::sql_at;
    use crate::storage::testing::{Backend, TestDatabase};

    /// Three batches and a bit of settled operations that expired long ago.
    async fn a_backlog(db: &TestDatabase) -> Database {
        let database = Database::open(db.url()).await.unwrap();
        let ledger = database.ledger_store();
        let backlog = 3 * RETENTION_BATCH + 1;
        for n in 0..backlog {
            start(
                ledger.as_ref(),
                &request("billing", &format!("order-{n}"), "refund"),
            )
            .await;
        }
        let long_ago = Utc::now() - TimeDelta::days(400);
        let settled = "update operations set status = 'succeeded', expires_at = $1";
        sql_at(Backend::Sqlite, db, settled, long_ago).await;
        sql_at(
            Backend::Sqlite,
            db,
            "update operation_events set at = $1",
            long_ago,
        )
        .await;
        database
    }

    #[tokio::test]
    async fn rounds_go_on_until_the_backlog_is_gone_unless_the_server_stops() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let database = a_backlog(&db).await;
        let worker = Retention::new(database.clone(), TimeDelta::days(30), Duration::ZERO);
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        stop_sender.send(true).unwrap();
        assert_eq!(worker.run_once(&stop).await, Purged::default());

        let (_running, go_on) = tokio::sync::watch::channel(false);
        let purged = worker.run_once(&go_on).await;
        assert_eq!(purged.operations, 3 * RETENTION_BATCH.unsigned_abs() + 1);
        assert_eq!(worker.run_once(&go_on).await, Purged::default());
        database.close().await;
    }
}
