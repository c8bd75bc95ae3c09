//! The ledger on SQLite. Every change runs on the single writer connection and starts with
//! `BEGIN IMMEDIATE`, so a claim's read and write never interleave with another's and no
//! lock upgrade can deadlock. One process owns the file, so its clock decides time.

use app::domain::{Namespace, OperationStatus};
use app::ledger::{
    decide_claim, decide_report, Claim, ClaimRequest, Decision, Event, Fresh, Operation, Report,
    ReportRefused, Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};
use std::future::Future;
use std::sync::Arc;
use uuid::Uuid;

use super::group_commit::GroupCommit;
use super::listed_changes::{NewKeyClaim, UnchangedUpdate};
use super::SqliteStore;
use crate::storage::backend::SqlBackend;
use crate::storage::dialect::Dialect;
use crate::storage::kept_rows::{self, KeptRows, MadeWrites};
use crate::storage::ledger_sql::{
    insert_events, operation_by_id, push_event_rows, push_write, LedgerBackend,
    EVENTS_PER_STATEMENT, INSERT_EVENTS,
};
use crate::storage::operation_rows::{OperationRow, OPERATION_COLUMNS};
use crate::storage::tool_counts_sql;
use crate::storage::written_behind::{BehindSink, Tally};
use crate::storage::{store_error, Staging};

/// Runs a list of statements; the rows they changed, all together.
async fn rows_changed(
    mut sql: QueryBuilder<'_, Sqlite>,
    tx: &mut SqliteConnection,
) -> Result<u64, StoreError> {
    let done = sql.build().execute(tx).await.map_err(store_error)?;
    Ok(done.rows_affected())
}

/// Ends the statement before, if any, so another can follow in the same list.
fn separate(sql: &mut QueryBuilder<'_, Sqlite>) {
    if !sql.sql().is_empty() {
        sql.push("; ");
    }
}

/// Awaits `write` and then, before its caller hears of it, tells the rows kept in memory (it
/// forgets the final outcomes the change replaced and keeps the operations it leased). Where
/// rows are kept, both run on a task of their own: the commit goes on if the caller goes
/// away (a cancelled request), so the forgetting must not depend on the caller either.
async fn forget_after<T, W>(store: &SqliteStore, write: W) -> Result<T, StoreError>
where
    T: MadeWrites + Send + 'static,
    W: Future<Output = Result<T, StoreError>> + Send + 'static,
{
    if store.kept().is_none() {
        return write.await;
    }
    let store = store.clone();
    tokio::spawn(async move {
        let made = write.await?;
        if let Some(kept) = store.kept() {
            kept.committed(made.writes());
        }
        Ok(made)
    })
    .await
    .map_err(|error| StoreError::Backend(Box::new(error)))?
}

/// Quiet events and counts go through the same writer, as one change of many rows.
pub(super) fn behind_sink(writer: GroupCommit) -> Arc<dyn BehindSink> {
    Arc::new(WriterSink(writer))
}

struct WriterSink(GroupCommit);

#[async_trait::async_trait]
impl BehindSink for WriterSink {
    async fn write(&self, events: &[Event], tally: &Tally) -> Result<(), StoreError> {
        let behind = Arc::new((events.to_vec(), tally.clone()));
        self.0
            .write(move |tx| {
                let behind = behind.clone();
                Box::pin(async move {
                    let (events, tally) = &*behind;
                    insert_events::<Sqlite>(tx, events).await?;
                    tool_counts_sql::add::<Sqlite>(tx, tally).await?;
                    Ok(((), Vec::new()))
                })
            })
            .await
    }
}

impl LedgerBackend for SqliteStore {
    fn kept(&self) -> Option<&KeptRows> {
        self.kept.as_deref()
    }

    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, T> + Send + 'static,
    {
        self.group_commit.write(work).await
    }

    /// Runs a change (as `write`) and then, before its caller hears of it, tells the rows kept
    /// in memory (see [`forget_after`]).
    async fn write_and_forget<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: MadeWrites + Send + 'static,
        F: for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, T> + Send + 'static,
    {
        let writer = self.group_commit.clone();
        forget_after(self, async move { writer.write(work).await }).await
    }

    /// The live operation of a key and the time it was read at. The writer's `BEGIN IMMEDIATE`
    /// is SQLite's lock, so `lock` asks for nothing more.
    async fn live_now(
        conn: &mut SqliteConnection,
        namespace: &Namespace,
        key: &str,
        _lock: bool,
    ) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
        let sql = format!("select {OPERATION_COLUMNS} from operations where namespace = $1 and key = $2 and retired_at is null");
        let live: Option<OperationRow> = sqlx::query_as(&sql)
            .bind(namespace.as_str())
            .bind(key)
            .fetch_optional(&mut *conn)
            .await
            .map_err(store_error)?;
        let live = live.map(Operation::try_from).transpose()?;
        let now = Sqlite::now(conn).await?;
        Ok(live.map(|operation| (operation, now)))
    }

    /// The live operation of a key, if any, and the time it was read at, on a reader.
    async fn key_now(
        &self,
        namespace: &Namespace,
        key: &str,
    ) -> Result<(Option<Operation>, DateTime<Utc>), StoreError> {
        let mut conn = self.read_connection().await?;
        Ok(
            match Self::live_now(&mut conn, namespace, key, false).await? {
                Some((live, now)) => (Some(live), now),
                None => (None, Sqlite::now(&mut conn).await?),
            },
        )
    }

    /// An operation by id, in the writer's transaction, and the time it was read at.
    async fn locked_now(
        conn: &mut SqliteConnection,
        id: Uuid,
    ) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
        let operation = operation_by_id::<Sqlite>(conn, id, true).await?;
        let now = Sqlite::now(conn).await?;
        Ok(operation.map(|operation| (operation, now)))
    }

    /// Stages a decision's writes and events as one list of statements, run in one trip to
    /// sqlx's SQLite worker thread: on the single writer that trip, not SQLite's work, is what
    /// a statement costs, so a change costs one trip instead of one per row.
    async fn stage_writes(
        tx: &mut SqliteConnection,
        writes: &[Write],
        events: &[Event],
    ) -> Result<(), StoreError> {
        if writes.is_empty() && events.is_empty() {
            return Ok(());
        }
        let mut sql = QueryBuilder::<Sqlite>::new("");
        for write in writes {
            separate(&mut sql);
            push_write(&mut sql, write);
        }
        for chunk in events.chunks(EVENTS_PER_STATEMENT) {
            separate(&mut sql);
            sql.push(INSERT_EVENTS);
            push_event_rows(&mut sql, chunk);
        }
        // Each write changes exactly one row and each event is one; fewer means a guarded
        // transition found the operation moved, which the writer's lock rules out: reported,
        // and the transaction is rolled back.
        if rows_changed(sql, tx).await? == (writes.len() + events.len()) as u64 {
            Ok(())
        } else {
            Err(StoreError::Stale)
        }
    }

    /// A claim whose key had no live operation when it was read outside the writer (most likely
    /// still so), or was not read at all (see `LedgerBackend::may_skip_read`): the new
    /// operation is inserted without reading (again), in one list with its events (staged with
    /// other such claims, each statement once for all). The unique index on a key's live operation decides: when the
    /// key is taken, the insert does nothing, nor do the events, and `None` sends the claim back
    /// to be decided from a read. It is decided at the process's clock as it is sent to the
    /// writer.
    async fn claim_new_key(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: &Fresh,
        _read_at: Option<DateTime<Utc>>,
    ) -> Result<Option<Decision<Claim>>, StoreError> {
        let decision = decide_claim(None, request, actor, fresh.clone(), kept_rows::now());
        let Some(claim) = NewKeyClaim::of(decision) else {
            return Ok(None);
        };
        let writer = self.group_commit.clone();
        forget_after(self, async move { writer.write_listed(claim).await }).await
    }

    /// A completion (or a report of `unknown`) of a pending operation, decided from the row as
    /// this store last leased it (kept in memory) or else from a read outside the writer, and
    /// written only if the operation is still as read: the writer then stages it in a list
    /// (with others, each statement once for all) instead of reading under its lock first. `None` when it is
    /// not such a report, or the operation moved meanwhile (another report, the lease reaper,
    /// a person, a takeover with a new lease): then it is decided again under the lock.
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
            None => {
                let mut conn = self.reader.acquire().await.map_err(store_error)?;
                let Some(read) = Self::locked_now(&mut conn, id).await? else {
                    return Ok(None);
                };
                read
            }
        };
        if &before.namespace != namespace {
            return Ok(None);
        }
        // Only a pending operation's accepted report is an update from `pending`.
        let decision = decide_report(before.clone(), token, report, actor, now);
        if !matches!(
            decision.writes.as_slice(),
            [Write::Update {
                expected_status: OperationStatus::Pending,
                ..
            }]
        ) {
            return Ok(None);
        }
        let Some(update) = UnchangedUpdate::of(&before, decision) else {
            return Ok(None);
        };
        let writer = self.group_commit.clone();
        forget_after(self, async move { writer.write_listed(update).await }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::backend::SqlStore;
    use crate::storage::conformance::ledger::{
        complete, fresh, late_completion, overtaken_completion, request, start, succeeded,
        taken_over_digest,
    };
    use crate::storage::sqlite::lists::{stage_list_in, Listed, ListedRows};
    use crate::storage::testing::{Backend, TestDatabase};
    use app::ledger::{EventKind, LedgerStore};

    /// The ledger on a SQLite store.
    type Store = SqlStore<SqliteStore>;

    /// `store`, migrated, with one operation started: the store, its claim, the operation
    /// and its lease token.
    async fn pending_on(store: SqliteStore) -> (Store, ClaimRequest, Operation, String) {
        store.migrate().await.unwrap();
        let store = SqlStore(store);
        let order = request("billing", "order-1", "refund");
        let (started, token) = start(&store, &order).await;
        (store, order, started, token)
    }

    async fn pending(db: &TestDatabase) -> (Store, ClaimRequest, Operation, String) {
        pending_on(SqliteStore::open(db.url()).await.unwrap()).await
    }

    /// As [`pending`], on a store opened as `idem serve` opens it (keeping rows in memory).
    async fn served_pending(db: &TestDatabase) -> (Store, ClaimRequest, Operation, String) {
        pending_on(SqliteStore::open_to_serve(db.url()).await.unwrap()).await
    }

    /// In one writer transaction: `first`, then `late` (decided from `before`) staged only
    /// if the row is unchanged; whether it was.
    async fn stage_late<T: Clone + Send + Sync + 'static>(
        store: &Store,
        before: &Operation,
        late: Decision<T>,
        first: Vec<Write>,
    ) -> bool {
        let late = UnchangedUpdate::of(before, late).expect("one update of a leased operation");
        let input = Arc::new((late, first));
        store
            .0
            .write(move |tx| {
                let input = input.clone();
                Box::pin(async move {
                    let (late, first) = &*input;
                    SqliteStore::stage_writes(tx, first, &[]).await?;
                    let applied = stage_list_in(tx, &[late as &dyn ListedRows]).await?;
                    let (staged, _) = late.answer(applied == [true]);
                    Ok((staged.is_some(), Vec::new()))
                })
            })
            .await
            .unwrap()
    }

    fn kinds(events: Vec<Event>) -> Vec<EventKind> {
        events.into_iter().map(|e| e.kind).collect()
    }

    /// The operations stored for a key, live or retired.
    async fn operations_of(store: &Store, key: &str) -> i64 {
        sqlx::query_scalar("select count(*) from operations where key = $1")
            .bind(key)
            .fetch_one(&store.0.reader)
            .await
            .unwrap()
    }

    /// New keys' claims share a list with one whose key is taken (a claim tried unread):
    /// each applies or not on its own, and the taken one writes nothing, not even events.
    #[tokio::test]
    async fn new_keys_listed_beside_a_taken_one_apply_each_on_its_own() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, taken, started, _) = pending(&db).await;
        let claims: Vec<NewKeyClaim> = ["order-2", "order-1", "order-3"]
            .into_iter()
            .map(|key| {
                let claim = request("billing", key, "refund");
                let decided = decide_claim(None, &claim, "agent:t", fresh(), kept_rows::now());
                NewKeyClaim::of(decided).expect("a new key's insert")
            })
            .collect();
        let ids: Vec<Uuid> = claims.iter().map(|c| c.operation.id).collect();

        let input = Arc::new(claims);
        let applied = store
            .0
            .write(move |tx| {
                let input = input.clone();
                Box::pin(async move {
                    let list: Vec<&dyn ListedRows> =
                        input.iter().map(|c| c as &dyn ListedRows).collect();
                    Ok((stage_list_in(tx, &list).await?, Vec::new()))
                })
            })
            .await
            .unwrap();

        assert_eq!(applied, [true, false, true]);
        for id in [ids[0], ids[2]] {
            assert!(store.operation(id).await.unwrap().is_some());
            assert_eq!(kinds(store.events(id).await.unwrap()), [EventKind::Claimed]);
        }
        assert_eq!(store.operation(ids[1]).await.unwrap(), None);
        assert_eq!(store.events(ids[1]).await.unwrap(), []);
        assert_eq!(operations_of(&store, taken.key.as_str()).await, 1);
        assert_eq!(
            kinds(store.events(started.id).await.unwrap()),
            [EventKind::Claimed],
            "the taken key's operation is as it was"
        );
        store.0.close().await;
    }

    /// A served store tries a key it knows nothing of as new, without reading it; found
    /// taken, the claim is decided from a read, and the key's next claims read first.
    #[tokio::test]
    async fn a_served_store_tries_a_key_unread_once_and_reads_it_once_found_taken() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, order, started, _) = served_pending(&db).await;
        let kept = store.0.kept().expect("a served store keeps rows");
        assert!(
            !kept.seen_live(&order.namespace, &order.key),
            "the claim that inserted the key read nothing"
        );
        let lists = store.0.group_commit.lists();

        for duplicate in 1..=2 {
            let decided = store.claim(&order, "agent:dup", fresh()).await.unwrap();
            assert!(
                matches!(&decided.outcome, Claim::InProgress { operation, .. } if operation.id == started.id),
                "duplicate {duplicate}: {:?}",
                decided.outcome
            );
            assert!(kept.seen_live(&order.namespace, &order.key));
            assert_eq!(
                store.0.group_commit.lists(),
                lists + 1,
                "duplicate {duplicate}: only the first tried an insert"
            );
        }
        assert_eq!(operations_of(&store, order.key.as_str()).await, 1);
        assert_eq!(
            kinds(store.events(started.id).await.unwrap()),
            [EventKind::Claimed]
        );
        store.0.close().await;
    }

    /// The fast way is taken for a plain completion; were it skipped, completions would
    /// still be right, only slower, so it is checked here rather than by its answers.
    #[tokio::test]
    async fn a_completion_of_an_unchanged_pending_operation_is_written_from_its_read() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, order, started, token) = pending(&db).await;

        let namespace = order.namespace.clone();
        let decided = store
            .0
            .report_from_read(&namespace, started.id, &token, &succeeded(), "agent:t")
            .await
            .unwrap()
            .expect("decided from the read");
        let completed = decided.outcome.expect("accepted");
        assert_eq!(completed.status, OperationStatus::Succeeded);
        let stored = store.operation(started.id).await.unwrap().unwrap();
        assert_eq!(stored, completed, "what was answered is what is stored");
        assert_eq!(
            kinds(store.events(started.id).await.unwrap()),
            [EventKind::Claimed, EventKind::Completed]
        );

        let elsewhere = Namespace::try_from("support").unwrap();
        let other = store
            .0
            .report_from_read(&elsewhere, started.id, &token, &succeeded(), "agent:t")
            .await
            .unwrap();
        assert!(
            other.is_none(),
            "another namespace's report goes the locked way"
        );
        store.0.close().await;
    }

    /// A served store keeps the pending operation it leased and decides its completion from
    /// that, without a read; once completed, it is no longer kept.
    #[tokio::test]
    async fn a_served_store_decides_a_completion_from_the_operation_it_leased() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, order, started, token) = served_pending(&db).await;
        let rows = store.0.kept().expect("a served store keeps rows");
        let leased = rows.leased(started.id).map(|(operation, _)| operation);
        assert_eq!(leased, Some(started.clone()), "kept as committed");

        let completed = complete(&store, &order, started.id, &token, "agent:t").await;
        assert_eq!(completed.unwrap().status, OperationStatus::Succeeded);
        assert!(rows.leased(started.id).is_none(), "no longer pending");
        store.0.close().await;
    }

    /// What a served store keeps is only a hint: when the row moved behind its back (here
    /// another handle on the file gives the operation a new lease), a completion with the
    /// lease it remembers is refused, and the row is not written over.
    #[tokio::test]
    async fn a_row_that_moved_behind_a_served_store_is_not_overwritten_from_memory() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, order, started, token) = served_pending(&db).await;
        let other = SqlStore(SqliteStore::open(db.url()).await.unwrap());
        sqlx::query("update operations set lease_token = $2 where id = $1")
            .bind(started.id)
            .bind(taken_over_digest())
            .execute(&other.0.writer)
            .await
            .unwrap();

        let refused = complete(&store, &order, started.id, &token, "agent:t").await;
        assert!(
            matches!(refused, Err(ReportRefused::LeaseLost)),
            "{refused:?}"
        );
        let stored = other.operation(started.id).await.unwrap().unwrap();
        assert_eq!(stored.status, OperationStatus::Pending);
        assert_eq!(
            stored.lease.unwrap().token_hash.as_str(),
            taken_over_digest()
        );
        assert_eq!(
            kinds(other.events(started.id).await.unwrap()),
            [EventKind::Claimed]
        );
        other.0.close().await;
        store.0.close().await;
    }

    /// A decision made from a read that another change overtook writes nothing, not even
    /// its events: here the first completion lands between the second one's read and write.
    #[tokio::test]
    async fn a_decision_on_a_row_that_moved_since_its_read_stages_nothing() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, order, before, token) = pending(&db).await;
        let late = overtaken_completion(&store, &order, &before, &token).await;

        let staged = stage_late(&store, &before, late, Vec::new()).await;
        assert!(!staged, "the moved row is not overwritten");
        let events = store.events(before.id).await.unwrap();
        assert_eq!(
            kinds(events.clone()),
            [EventKind::Claimed, EventKind::Completed]
        );
        assert_eq!(
            events[1].actor, "agent:first",
            "only the first completion's event"
        );
        store.0.close().await;
    }

    /// The same guard catches a takeover, which leaves the status `pending` but gives the
    /// operation a new lease.
    #[tokio::test]
    async fn a_new_lease_on_a_still_pending_operation_counts_as_a_move() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let (store, _, before, token) = pending(&db).await;
        let stale = late_completion(&before, &token, "agent:old");

        let mut taken_over = before.clone();
        taken_over.lease = Some(app::ledger::HeldLease {
            token_hash: app::ledger::LeaseTokenHash::of(&fresh().lease_token),
            expires_at: before.lease.as_ref().unwrap().expires_at,
        });
        let takeover = Write::Update {
            after: taken_over,
            expected_status: OperationStatus::Pending,
        };
        let staged = stage_late(&store, &before, stale, vec![takeover]).await;
        assert!(!staged);
        let stored = store.operation(before.id).await.unwrap().unwrap();
        assert_eq!(
            stored.status,
            OperationStatus::Pending,
            "the old lease completed nothing"
        );
        store.0.close().await;
    }
}
