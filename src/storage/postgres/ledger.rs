//! The ledger on PostgreSQL. A claim of a key that had no live operation when read inserts
//! it at once (`on conflict do nothing`, one statement with its events); the unique index on
//! a key's live operation lets one of racing claims win, in this process or another, and the
//! others are decided from a locked read of the winner's row. Other changes lock the row
//! they change (`select … for update`), except a completion of a pending operation, written
//! guarded by what it read. The unlocked reads are made together with those that arrive
//! with them (`group_read`), the unlocked writes likewise (`group_commit`). Time is the
//! database's, so every process agrees on leases and expiry.
//!
//! `idem serve` (a member of `kept_members`) reads less: a key it has not seen live lately
//! is tried as new without a read, and a completion is decided from the operation as this
//! process leased it (`KeptRows`), both at the database's time as the member's beats bound
//! it. Both are only hints the unique index or the guarded write checks.

use app::domain::{Namespace, OperationStatus};
use app::ledger::{
    decide_claim, decide_report, Claim, ClaimRequest, Decision, Event, Fresh, Operation,
    OperationChange, Report, ReportRefused, Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres};
use std::sync::Arc;
use uuid::Uuid;

use super::group_commit::{Listed, RowChange, Unchanged};
use super::PostgresStore;
use crate::storage::kept_rows::{KeptRows, MadeWrites};
use crate::storage::ledger_sql::{
    insert_events, push_write, LedgerBackend, EVENTS_PER_STATEMENT, INSERT_EVENTS,
};
use crate::storage::operation_rows::{OperationRow, OPERATION_COLUMNS};
use crate::storage::store_error;
use crate::storage::tool_counts_sql;
use crate::storage::written_behind::{BehindSink, Tally};
use crate::storage::Staging;

/// Applies writes one statement each (a change's writes are one to three rows).
async fn apply(tx: &mut PgConnection, writes: &[Write]) -> Result<(), StoreError> {
    for write in writes {
        let mut sql = sqlx::QueryBuilder::<Postgres>::new("");
        push_write(&mut sql, write);
        changing(sql, tx, 1).await?;
    }
    Ok(())
}

/// Runs a statement that must change `rows` rows. Fewer means a guarded transition found
/// the operation moved under us, which the transaction's lock rules out; it is reported
/// (`Stale`) rather than ignored.
async fn changing(
    mut sql: sqlx::QueryBuilder<'_, Postgres>,
    tx: &mut PgConnection,
    rows: u64,
) -> Result<(), StoreError> {
    let done = sql.build().execute(tx).await.map_err(store_error)?;
    if done.rows_affected() == rows {
        Ok(())
    } else {
        Err(StoreError::Stale)
    }
}

/// Ends the write in `sql` (opened by `with written as (`) and appends its events, one row
/// each for every row the write changed (at most one): ` returning 1) insert into
/// operation_events select … from written union all …`. Needs 1 to `EVENTS_PER_STATEMENT`
/// events.
fn push_events_of_written<'a>(sql: &mut sqlx::QueryBuilder<'a, Postgres>, events: &'a [Event]) {
    sql.push(" returning 1) ").push(INSERT_EVENTS);
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            sql.push(" union all ");
        }
        sql.push("select ")
            .push_bind(event.operation_id)
            .push(", ")
            .push_bind(event.at)
            .push(", ")
            .push_bind(event.kind.as_str())
            .push(", ")
            .push_bind(&event.actor)
            .push(", ")
            .push_bind(Json(&event.detail))
            .push(" from written");
    }
}

/// Writes a decision on a pending operation (its one update and its events) with the
/// changes that arrive with it, only if the row is still as `before`: its status, lease and
/// time of last change. Whether it was; `false`, with nothing written, also for any other
/// decision.
async fn write_if_unchanged<T>(
    store: &PostgresStore,
    before: &Operation,
    decision: &Decision<T>,
) -> Result<bool, StoreError> {
    let (
        Some(lease),
        [Write::Update {
            after,
            expected_status: expected_status @ OperationStatus::Pending,
        }],
    ) = (&before.lease, decision.writes.as_slice())
    else {
        return Ok(false);
    };
    let change = RowChange::UnchangedUpdate(Unchanged {
        after: after.clone(),
        expected_status: *expected_status,
        lease_token: lease.token_hash.as_str().to_owned(),
        read_updated_at: before.updated_at,
    });
    write_listed(store, change, decision).await
}

/// Writes `change` with its decision's state-changing events through the group commit;
/// whether it applied. `false`, with nothing written, for a change with more events than one
/// statement carries: it is then made under the lock.
async fn write_listed<T>(
    store: &PostgresStore,
    change: RowChange,
    decision: &Decision<T>,
) -> Result<bool, StoreError> {
    let events = decision.state_events();
    if events.len() > EVENTS_PER_STATEMENT {
        return Ok(false);
    }
    store.group_commit.write(Listed { change, events }).await
}

#[derive(sqlx::FromRow)]
struct ReadAtRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    read_at: DateTime<Utc>,
}

impl ReadAtRow {
    fn into_pair(self) -> Result<(Operation, DateTime<Utc>), StoreError> {
        Ok((Operation::try_from(self.operation)?, self.read_at))
    }
}

/// Quiet events and counts are written in their own transactions, many rows per statement.
pub(super) fn behind_sink(pool: PgPool) -> Arc<dyn BehindSink> {
    Arc::new(PoolSink(pool))
}

struct PoolSink(PgPool);

#[async_trait::async_trait]
impl BehindSink for PoolSink {
    async fn write(&self, events: &[Event], tally: &Tally) -> Result<(), StoreError> {
        let mut tx = self.0.begin().await.map_err(store_error)?;
        insert_events::<Postgres>(&mut tx, events).await?;
        tool_counts_sql::add::<Postgres>(&mut tx, tally).await?;
        tx.commit().await.map_err(store_error)
    }
}

impl LedgerBackend for PostgresStore {
    /// The final outcomes kept in memory, while this process may answer from them (see
    /// `kept_members`: other processes change the database too).
    fn kept(&self) -> Option<&KeptRows> {
        self.membership.as_ref()?.rows()
    }

    /// One transaction per change decided under a row lock (those that are only rows to
    /// write go to `group_commit` instead). Its changes are announced to every process once
    /// it has committed.
    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut PgConnection) -> Staging<'c, T> + Send + 'static,
    {
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let (output, changes) = work(&mut tx).await?;
        tx.commit().await.map_err(store_error)?;
        self.announcer.announce(changes);
        Ok(output)
    }

    /// Runs a change (as `write`); if it replaced a final outcome, answers only once every
    /// process that keeps outcomes in memory has forgotten it (`kept_members::fence`). Each
    /// process forgets by itself, from the change's announcement, even if this caller goes away.
    async fn write_and_forget<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: MadeWrites + Send + 'static,
        F: for<'c> Fn(&'c mut PgConnection) -> Staging<'c, T> + Send + 'static,
    {
        let made = self.write(work).await?;
        if KeptRows::replaced_final(made.writes()) {
            super::kept_members::fence(&self.pool).await?;
        }
        Ok(made)
    }

    /// The live operation of a key (locked: `for update`) and the database's time, in one round
    /// trip.
    async fn live_now(
        conn: &mut PgConnection,
        namespace: &Namespace,
        key: &str,
        lock: bool,
    ) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
        let lock = if lock { " for update" } else { "" };
        let sql = format!("select {OPERATION_COLUMNS}, clock_timestamp() as read_at from operations where namespace = $1 and key = $2 and retired_at is null{lock}");
        let row: Option<ReadAtRow> = sqlx::query_as(&sql)
            .bind(namespace.as_str())
            .bind(key)
            .fetch_optional(conn)
            .await
            .map_err(store_error)?;
        row.map(ReadAtRow::into_pair).transpose()
    }

    /// The live operation of a key, if any, and the database's time, read together with the
    /// other lookups that arrive with it (`group_read`).
    async fn key_now(
        &self,
        namespace: &Namespace,
        key: &str,
    ) -> Result<(Option<Operation>, DateTime<Utc>), StoreError> {
        self.group_read.key(namespace, key).await
    }

    /// An operation by id, locked, and the database's time, in one round trip.
    async fn locked_now(
        conn: &mut PgConnection,
        id: Uuid,
    ) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
        let sql = format!("select {OPERATION_COLUMNS}, clock_timestamp() as read_at from operations where id = $1 for update");
        let row: Option<ReadAtRow> = sqlx::query_as(&sql)
            .bind(id)
            .fetch_optional(conn)
            .await
            .map_err(store_error)?;
        row.map(ReadAtRow::into_pair).transpose()
    }

    /// A change's writes and its events, in as few round trips as one statement each can carry:
    /// the last write takes the events along in a data-modifying `with` (`with written as
    /// (<write> returning 1) insert into operation_events select … from written`), so the usual
    /// change of one write is one round trip. The events follow only a write that changed its
    /// row; fewer rows than events means it did not (`Stale`, rolled back).
    async fn stage_writes(
        tx: &mut PgConnection,
        writes: &[Write],
        events: &[Event],
    ) -> Result<(), StoreError> {
        let Some((last, first)) = writes.split_last() else {
            return insert_events::<Postgres>(tx, events).await;
        };
        apply(tx, first).await?;
        if events.is_empty() || events.len() > EVENTS_PER_STATEMENT {
            apply(tx, std::slice::from_ref(last)).await?;
            return insert_events::<Postgres>(tx, events).await;
        }
        let mut sql = sqlx::QueryBuilder::<Postgres>::new("with written as (");
        push_write(&mut sql, last);
        push_events_of_written(&mut sql, events);
        changing(sql, tx, events.len() as u64).await
    }

    /// A claim whose key had no live operation when it was read (at `read_at`, the database's
    /// time), or was not read (see `LedgerBackend::may_skip_read`; decided at
    /// `KeptRows::decision_time`): the new operation and its events are written outside a
    /// transaction, by one statement with the changes that arrive with it (`group_commit`),
    /// instead of four round trips (begin, locked read, write, commit) each. The unique index on a key's live
    /// operation decides: when another claim took the key in between (in this process or
    /// another, in this batch or another), nothing is written, and `None` sends the claim back
    /// to be decided from a locked read.
    async fn claim_new_key(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: &Fresh,
        read_at: Option<DateTime<Utc>>,
    ) -> Result<Option<Decision<Claim>>, StoreError> {
        let now = match (read_at, self.kept()) {
            (Some(read_at), _) => read_at,
            (None, Some(kept)) => kept.decision_time(),
            (None, None) => return Ok(None),
        };
        let decision = decide_claim(None, request, actor, fresh.clone(), now);
        let [Write::Insert(operation)] = decision.writes.as_slice() else {
            return Ok(None);
        };
        let change = RowChange::NewKeyClaim(operation.clone());
        let applied = write_listed(self, change, &decision).await?;
        Ok(self.announced(applied.then_some(decision)))
    }

    /// A completion (or a report of `unknown`) of a pending operation, decided from the row
    /// as this process leased it (kept in memory) or else from a read
    /// without a lock and written outside a transaction with the changes that arrive with it
    /// (`group_commit`), guarded by what was read (status, lease token, `updated_at`: any
    /// change to a pending operation moves one of them), its events riding along. The report
    /// costs a read and a share of one statement instead of four round trips (begin, locked
    /// read, write, commit). `None` when it is not such a report, or the row moved meanwhile —
    /// then it is decided again under the lock.
    async fn report_from_read(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: &Report,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError> {
        let kept = self.kept().and_then(|rows| rows.leased(id));
        let (before, now) = match kept {
            Some(kept) => kept,
            None => match self.group_read.by_id(id).await? {
                (Some(before), now) => (before, now),
                (None, _) => return Ok(None),
            },
        };
        if &before.namespace != namespace {
            return Ok(None);
        }
        let decision = decide_report(before.clone(), token, report, actor, now);
        let applied = write_if_unchanged(self, &before, &decision).await?;
        Ok(self.announced(applied.then_some(decision)))
    }
}

impl PostgresStore {
    /// The decision of a write committed outside `write`, once the rows kept in memory have
    /// learnt of it (the operation it leased) and its changes are announced.
    fn announced<T>(&self, written: Option<Decision<T>>) -> Option<Decision<T>> {
        if let Some(decision) = &written {
            if let Some(kept) = self.kept() {
                kept.committed(&decision.writes);
            }
            self.announcer
                .announce(OperationChange::of_writes(&decision.writes));
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::backend::SqlBackend as _;
    use crate::storage::backend::SqlStore;
    use crate::storage::conformance::ledger::{
        complete, fresh, late_completion, overtaken_completion, request, start, succeeded,
        taken_over_digest,
    };
    use crate::storage::testing::{Backend, TestDatabase};
    use app::ledger::{EventKind, LedgerStore};

    /// The ledger on a PostgreSQL store.
    type Store = SqlStore<PostgresStore>;

    /// A migrated store with one operation started: the store, its claim, the operation
    /// and its lease token.
    async fn pending(db: &TestDatabase) -> (Store, ClaimRequest, Operation, String) {
        let store = PostgresStore::open(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        let store = SqlStore(store);
        let order = request("billing", "order-1", "refund");
        let (started, token) = start(&store, &order).await;
        (store, order, started, token)
    }

    async fn kinds_and_actors(store: &Store, id: Uuid) -> Vec<(EventKind, String)> {
        let events = store.events(id).await.unwrap();
        events.into_iter().map(|e| (e.kind, e.actor)).collect()
    }

    /// A new key is claimed in one statement; a second claim of it that way writes nothing
    /// and is sent to the locked read (`None`).
    #[tokio::test]
    async fn a_new_key_is_claimed_in_one_statement_and_only_once() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = PostgresStore::open(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        let store = SqlStore(store);
        let order = request("billing", "order-1", "refund");
        let (none, read_at) = store.0.key_now(&order.namespace, "order-1").await.unwrap();
        assert!(none.is_none());

        let first = store
            .0
            .claim_new_key(&order, "agent:first", &fresh(), Some(read_at))
            .await
            .unwrap()
            .expect("claimed");
        let Claim::Started { operation, .. } = first.outcome else {
            panic!("expected a start, got {:?}", first.outcome);
        };
        assert_eq!(
            store.operation(operation.id).await.unwrap(),
            Some(operation.clone())
        );
        let second = store
            .0
            .claim_new_key(&order, "agent:second", &fresh(), Some(read_at))
            .await
            .unwrap();
        assert!(second.is_none(), "the key is taken");

        let (live, _) = store.0.key_now(&order.namespace, "order-1").await.unwrap();
        assert_eq!(
            live,
            Some(operation.clone()),
            "the first claim's operation is live"
        );
        assert_eq!(
            kinds_and_actors(&store, operation.id).await,
            [(EventKind::Claimed, "agent:first".to_owned())]
        );
        let all: i64 = sqlx::query_scalar("select count(*) from operation_events")
            .fetch_one(&store.0.pool)
            .await
            .unwrap();
        assert_eq!(all, 1, "the second claim wrote no event");
        store.0.close().await;
    }

    /// The fast way is taken for a plain completion (were it skipped, completions would still
    /// be right, only slower, so it is checked here rather than by its answers).
    #[tokio::test]
    async fn a_completion_of_an_unchanged_pending_operation_is_one_statement() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let (store, order, started, token) = pending(&db).await;
        let decided = store
            .0
            .report_from_read(
                &order.namespace,
                started.id,
                &token,
                &succeeded(),
                "agent:t",
            )
            .await
            .unwrap()
            .expect("decided from the read");
        let completed = decided.outcome.expect("accepted");
        let stored = store.operation(started.id).await.unwrap().unwrap();
        assert_eq!(stored, completed, "what was answered is what is stored");
        assert_eq!(
            kinds_and_actors(&store, started.id).await,
            [
                (EventKind::Claimed, "agent:test/k".to_owned()),
                (EventKind::Completed, "agent:t".to_owned())
            ]
        );
        store.0.close().await;
    }

    /// `idem serve` claims a key it knows nothing of without reading it, and completes the
    /// operation from what it leased, without reading that either: a new key's pair costs
    /// no lookup. Its times are the database's at the earliest, and what it answered is what
    /// is stored. A duplicate then finds the key taken, and the key's next claims read first.
    #[tokio::test]
    async fn a_served_store_claims_and_completes_a_new_key_without_a_read() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = super::super::kept_members::tests::serving(&db).await;
        let order = request("billing", "order-1", "refund");
        let kept = store.0.kept().expect("a served store keeps rows");
        let (database_before,): (DateTime<Utc>,) = sqlx::query_as("select clock_timestamp()")
            .fetch_one(&store.0.pool)
            .await
            .unwrap();
        let reads = store.0.group_read.statements();

        let (started, token) = start(&store, &order).await;
        assert!(
            started.created_at >= database_before,
            "decided at {} though the database's clock read {database_before} before",
            started.created_at
        );
        assert!(!kept.seen_live(&order.namespace, &order.key));
        assert_eq!(
            kept.leased(started.id).map(|(operation, _)| operation),
            Some(started.clone()),
            "kept as committed"
        );
        let completed = complete(&store, &order, started.id, &token, "agent:t")
            .await
            .expect("accepted");
        assert_eq!(store.0.group_read.statements(), reads, "nothing was read");
        assert!(completed.updated_at >= started.created_at);
        let stored = store.operation(started.id).await.unwrap().unwrap();
        assert_eq!(stored, completed, "what was answered is what is stored");
        assert!(kept.leased(started.id).is_none(), "no longer pending");

        let replay = store.claim(&order, "agent:again", fresh()).await.unwrap();
        assert!(
            matches!(&replay.outcome, Claim::Replayed { operation, .. } if operation.id == started.id),
            "{:?}",
            replay.outcome
        );
        assert!(kept.seen_live(&order.namespace, &order.key));
        let events = kinds_and_actors(&store, started.id).await;
        assert_eq!(
            events[..2],
            [
                (EventKind::Claimed, "agent:test/k".to_owned()),
                (EventKind::Completed, "agent:t".to_owned()),
            ]
        );
        let operations: i64 = sqlx::query_scalar("select count(*) from operations")
            .fetch_one(&store.0.pool)
            .await
            .unwrap();
        assert_eq!(operations, 1);
        store.0.close().await;
    }

    /// What `idem serve` leased is only a hint: when another process gave the operation a
    /// new lease, a completion with the lease it remembers is refused and writes nothing.
    #[tokio::test]
    async fn a_row_another_process_moved_is_not_overwritten_from_memory() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = super::super::kept_members::tests::serving(&db).await;
        let order = request("billing", "order-1", "refund");
        let (started, token) = start(&store, &order).await;
        let other = PostgresStore::open(db.url()).await.unwrap();
        sqlx::query(
            "update operations set lease_token = $2, updated_at = clock_timestamp() where id = $1",
        )
        .bind(started.id)
        .bind(taken_over_digest())
        .execute(&other.pool)
        .await
        .unwrap();
        assert!(store.0.kept().unwrap().leased(started.id).is_some());

        let refused = complete(&store, &order, started.id, &token, "agent:old").await;
        assert_eq!(refused, Err(ReportRefused::LeaseLost));
        let stored = store.operation(started.id).await.unwrap().unwrap();
        assert_eq!(stored.status, OperationStatus::Pending);
        assert_eq!(kinds_and_actors(&store, started.id).await.len(), 1);
        other.close().await;
        store.0.close().await;
    }

    /// A completion written from a read that another completion overtook changes nothing:
    /// neither the row nor the events.
    #[tokio::test]
    async fn a_completion_decided_before_another_landed_writes_nothing() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let (store, order, before, token) = pending(&db).await;
        let late = overtaken_completion(&store, &order, &before, &token).await;

        assert!(!write_if_unchanged(&store.0, &before, &late).await.unwrap());
        let events = kinds_and_actors(&store, before.id).await;
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[1], (EventKind::Completed, "agent:first".to_owned()));
        store.0.close().await;
    }

    /// The same guard catches a new lease on a still pending operation (a takeover).
    #[tokio::test]
    async fn a_completion_with_a_lease_taken_over_since_writes_nothing() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let (store, _, before, token) = pending(&db).await;
        let stale = late_completion(&before, &token, "agent:old");
        sqlx::query("update operations set lease_token = $2 where id = $1")
            .bind(before.id)
            .bind(taken_over_digest())
            .execute(&store.0.pool)
            .await
            .unwrap();

        assert!(!write_if_unchanged(&store.0, &before, &stale).await.unwrap());
        let stored = store.operation(before.id).await.unwrap().unwrap();
        assert_eq!(
            stored.status,
            OperationStatus::Pending,
            "the old lease completed nothing"
        );
        assert_eq!(kinds_and_actors(&store, before.id).await.len(), 1);
        store.0.close().await;
    }
}
