//! Retention: deletes operations long past their `expires_at`, with their events, and
//! expired sessions, a small batch per transaction so the writer is never held for long.
//! Written once for both databases; the backend gives its write transaction.

use app::ledger::metrics::minute_start;
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::store_error;
use super::unknown_spans_sql;

/// What one round deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Operations deleted (with all their events).
    pub operations: u64,
    /// Events deleted (of operations being deleted; an operation goes once it has none).
    pub events: u64,
    /// Expired sessions deleted.
    pub sessions: u64,
}

impl Purged {
    /// Whether the round deleted anything (so another round may find more).
    pub fn any(&self) -> bool {
        self.operations + self.events + self.sessions > 0
    }
}

/// What a round may delete.
#[derive(Debug, Clone, Copy)]
pub struct RetentionRound {
    /// Operations whose `expires_at` is before this go.
    pub expired_before: DateTime<Utc>,
    /// Sessions whose `expires_at` is before this go.
    pub now: DateTime<Utc>,
    /// At most this many operations, events and sessions per round.
    pub batch: i64,
}

/// Operations that may go: settled (never `unknown`, `pending`, `approved` or
/// `awaiting_approval`),
/// expired before `$1`, and with no event at or after `$2` — the first minute the metrics
/// roll-up has not folded — so the counters keep every event deleted here. In no order:
/// this runs inside the write transaction, and read from the index `operations_by_expiry`
/// as it comes, a batch is found without reading or sorting the other expired ones.
/// The events are counted by a scalar subquery rather than `not exists`: PostgreSQL turns
/// `not exists` into an anti join, which with a backlog (every operation expired) read the
/// whole event index for each round, while an aggregate subquery stays a lookup per
/// candidate on both databases.
pub const CANDIDATES: &str = r#"select o.id from operations o
    where o.status in ('succeeded', 'failed', 'rejected') and o.expires_at < $1
      and (select count(*) from operation_events e
           where e.operation_id = o.id and e.at >= $2) = 0
    limit $3"#;

/// `in ($first, …)` over `count` placeholders starting at `$first`.
pub fn placeholders(first: usize, count: usize) -> String {
    let list: Vec<String> = (first..first + count).map(|n| format!("${n}")).collect();
    list.join(", ")
}

/// Deletes at most `$1` events of the operations `$2…`.
pub fn delete_events(count: usize) -> String {
    format!(
        "delete from operation_events where seq in (select seq from operation_events \
         where operation_id in ({}) limit $1)",
        placeholders(2, count)
    )
}

/// Deletes the operations `$1…` (once their events are gone).
pub fn delete_operations(count: usize) -> String {
    format!(
        "delete from operations where id in ({})",
        placeholders(1, count)
    )
}

/// Deletes at most `$2` sessions that expired before `$1`.
pub const DELETE_SESSIONS: &str = r#"delete from sessions where token_hash in
    (select token_hash from sessions where expires_at < $1 limit $2)"#;

impl<B: SqlBackend> SqlStore<B> {
    /// One retention round: at most `round.batch` rows of each kind, one transaction.
    pub(crate) async fn purge_round(&self, round: &RetentionRound) -> Result<Purged, StoreError> {
        self.0.written_behind().flush().await;
        let mut tx = self.0.begin_write().await?;
        let (rolled_until,): (i64,) =
            B::Db::query_as("select rolled_until from metrics_rollup where name = 'event_minutes'")
                .row(&mut tx)
                .await?;
        let ids: Vec<(Uuid,)> = B::Db::query_as(CANDIDATES)
            .param(round.expired_before)
            .param(minute_start(rolled_until))
            .param(round.batch)
            .rows(&mut tx)
            .await?;
        unknown_spans_sql::fold_before_purge::<B::Db>(&mut tx, &ids, round.now).await?;
        let mut purged = Purged::default();
        if !ids.is_empty() {
            let sql = delete_events(ids.len());
            let mut query = sqlx::query::<B::Db>(&sql).param(round.batch);
            for (id,) in &ids {
                query = query.param(*id);
            }
            purged.events = query.run(&mut tx).await?;
            // Fewer than a batch: no event of these operations is left.
            if purged.events < round.batch.unsigned_abs() {
                let sql = delete_operations(ids.len());
                let mut query = sqlx::query::<B::Db>(&sql);
                for (id,) in &ids {
                    query = query.param(*id);
                }
                purged.operations = query.run(&mut tx).await?;
            }
        }
        purged.sessions = sqlx::query::<B::Db>(DELETE_SESSIONS)
            .param(round.now)
            .param(round.batch)
            .run(&mut tx)
            .await?;
        tx.commit().await.map_err(store_error)?;
        Ok(purged)
    }
}
