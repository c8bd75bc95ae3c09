//! Group commit on PostgreSQL: the changes that are only rows to write (a new key's claim,
//! a report decided from a read) and that arrive together are written by one statement, so
//! they share one commit and its fsync instead of paying one each.
//!
//! One statement is atomic without a transaction: its data-modifying `with` parts insert the
//! claims' operations (`on conflict do nothing`: a key taken, by this batch or another
//! process, holds back that claim alone), update the reported operations guarded by what
//! each report read, and insert the events of exactly the changes that applied; it answers
//! which ones did. Its rows come as arrays of columns (see `columns`), so every batch of a
//! kind runs the same statement, prepared once per connection. A caller hears of its change
//! only after the statement committed, so every acknowledgement is durable
//! (`synchronous_commit` stays on).
//!
//! Two batches run at once (`IN_FLIGHT`); the changes arriving meanwhile queue and become
//! the next batch, so batches grow with the load and a lone change is written at once.
//! A batch PostgreSQL refuses as a whole (a deadlock with another process, a constraint)
//! is rolled back, and its changes are written one by one, each answered on its own. Any
//! other failure (a lost connection) answers every change of the batch with that error: it
//! may or may not have committed, which only the ledger's next read can tell.

use app::domain::OperationStatus;
use app::ledger::{Event, Operation};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::Row;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::batches::{self, KeptConnections, Limits};
use super::columns::{place, CreatedColumns, EventColumns, Statement, UpdatedColumns};
use crate::storage::operation_rows::{
    to_text, CreatedValues, UpdatedValues, CREATED_COLUMNS, UPDATED_COLUMNS,
};
use crate::storage::retention_sql::placeholders;
use crate::storage::store_error;

/// The most changes written by one statement: bounds how long the last of a batch waits
/// for the others.
const MAX_BATCH: usize = 128;

/// The most rows (operations and events) one statement writes: bounds its size, one
/// message to PostgreSQL, so only changes with many events make a batch end before
/// `MAX_BATCH`.
const MAX_ROWS: usize = 4_096;

/// How many batches may be written at once. Fewer make bigger batches, and so less work
/// for PostgreSQL per change; more than one keeps a batch that waits for a row lock (another
/// process's change of the same key) from holding up every other change of this process.
pub(super) const IN_FLIGHT: usize = 2;

/// A change that is only rows to write, applying or not on its own.
pub(super) enum RowChange {
    /// A new key's operation, inserted unless its key has a live operation.
    NewKeyClaim(Operation),
    /// An operation's new values, written only if its row is still as the decision read it.
    UnchangedUpdate(Unchanged),
}

/// An operation's new values and what its row looked like when they were decided: its
/// status, lease and time of last change (any change to a leased operation moves one).
pub(super) struct Unchanged {
    pub(super) after: Operation,
    pub(super) expected_status: OperationStatus,
    pub(super) lease_token: String,
    pub(super) read_updated_at: DateTime<Utc>,
}

/// A change and its state-changing events, written only if the change applied.
pub(super) struct Listed {
    pub(super) change: RowChange,
    pub(super) events: Vec<Event>,
}

impl Listed {
    /// How many rows it writes: its operation's and its events'.
    fn rows(&self) -> usize {
        1 + self.events.len()
    }
}

/// Queues changes for the batches. Cheap to clone; the queue closes with the last handle.
#[derive(Clone)]
pub(super) struct GroupCommit {
    queue: mpsc::UnboundedSender<Job>,
    connections: Arc<KeptConnections>,
    #[cfg_attr(not(test), allow(dead_code))]
    counts: Arc<Counts>,
}

/// What the batches did, counted; tests read it to see that changes were grouped.
#[derive(Default)]
struct Counts {
    /// Statements that committed.
    commits: AtomicU64,
    /// Changes written by them (applied or held back by their guards).
    changes: AtomicU64,
}

struct Job {
    listed: Listed,
    reply: oneshot::Sender<Result<bool, StoreError>>,
}

impl GroupCommit {
    /// Starts gathering batches for `pool`.
    pub(super) fn start(pool: PgPool) -> Self {
        let (queue, jobs) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let connections = Arc::new(KeptConnections::new(pool));
        tokio::spawn(gather(connections.clone(), jobs, counts.clone()));
        Self {
            queue,
            connections,
            counts,
        }
    }

    /// Gives the connections kept between batches back to the pool (the store is closing).
    pub(super) fn release_connections(&self) {
        self.connections.release();
    }

    /// Writes `listed` with the changes that arrive with it; whether it applied (`false`:
    /// its guard held it back and nothing of it was written). Answers once committed.
    pub(super) async fn write(&self, listed: Listed) -> Result<bool, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job { listed, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Statements committed so far (fewer than changes, under load).
    #[cfg(test)]
    pub(super) fn commits(&self) -> u64 {
        self.counts.commits.load(Ordering::Relaxed)
    }

    /// Changes written so far.
    #[cfg(test)]
    pub(super) fn changes(&self) -> u64 {
        self.counts.changes.load(Ordering::Relaxed)
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the PostgreSQL group commit has stopped".into())
}

/// The group commit's statement is one text for every batch (see `columns`), so its
/// connections plan it once each (a generic plan) instead of at every run, where PostgreSQL
/// spent more time planning it than running it. That one plan may be made while the table is
/// empty and then serve it at a million rows, so these connections also rule out what a
/// planner without statistics may prefer on a small table and what would then read every
/// row of a big one at each batch: a sequential scan, a hash or a merge join. What is left
/// probes indexes, whichever it picks (the update's rows by id, the events' operations by
/// primary key).
pub(super) fn connect_options(options: PgConnectOptions) -> PgConnectOptions {
    options.options([
        ("plan_cache_mode", "force_generic_plan"),
        ("enable_seqscan", "off"),
        ("enable_hashjoin", "off"),
        ("enable_mergejoin", "off"),
    ])
}

/// Writes what queued on `jobs` in batches, until every handle is gone.
async fn gather(
    connections: Arc<KeptConnections>,
    jobs: mpsc::UnboundedReceiver<Job>,
    counts: Arc<Counts>,
) {
    let limits = Limits {
        in_flight: IN_FLIGHT,
        max_jobs: MAX_BATCH,
        max_weight: MAX_ROWS,
        weight: |job: &Job| job.listed.rows(),
    };
    batches::gather(jobs, limits, move |batch| {
        let (connections, counts) = (connections.clone(), counts.clone());
        async move { commit(&connections, batch, &counts).await }
    })
    .await;
}

/// Writes a batch and answers each of its changes.
async fn commit(connections: &KeptConnections, batch: Vec<Job>, counts: &Counts) {
    let listed: Vec<&Listed> = batch.iter().map(|job| &job.listed).collect();
    match write_batch(connections, &listed).await {
        Ok(applied) => {
            counts.commits.fetch_add(1, Ordering::Relaxed);
            counts
                .changes
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            for (n, job) in batch.into_iter().enumerate() {
                let _ = job.reply.send(Ok(applied.contains(&n)));
            }
        }
        // One after another: this batch's slot holds at most one connection at a time, so
        // the kept connections never outnumber the slots (a change waiting for the pool
        // while another's connection sat kept would wait out the pool's timeout).
        Err(error) if batch.len() > 1 && refused_whole(&error) => {
            for job in batch {
                Box::pin(commit(connections, vec![job], counts)).await;
            }
        }
        Err(error) => {
            let error = store_error(error);
            for job in batch {
                let _ = job.reply.send(Err(error.repeated()));
            }
        }
    }
}

/// Whether PostgreSQL refused the statement itself (a constraint, a deadlock, a
/// serialization failure): it then rolled it back, and its changes may be written again.
fn refused_whole(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code.starts_with("23") || code.starts_with("40"))
}

/// Runs a batch's statement; the positions in `batch` of the changes that applied.
async fn write_batch(
    connections: &KeptConnections,
    batch: &[&Listed],
) -> Result<HashSet<usize>, sqlx::Error> {
    let mut connection = connections.take().await?;
    let rows = bind_batch(batch).fetch_all(&mut *connection).await?;
    connections.keep(connection);
    let applied = rows
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<Result<Vec<(Option<Uuid>, Option<i32>)>, sqlx::Error>>()?;
    let claimed: HashSet<Uuid> = applied.iter().filter_map(|(id, _)| *id).collect();
    let updated = applied.iter().filter_map(|(_, n)| *n).map(|n| n as usize);
    let claims = batch
        .iter()
        .enumerate()
        .filter_map(|(n, listed)| match &listed.change {
            RowChange::NewKeyClaim(operation) => claimed.contains(&operation.id).then_some(n),
            RowChange::UnchangedUpdate(_) => None,
        });
    Ok(claims.chain(updated).collect())
}

/// The batch's statement with its rows bound as columns: its claims, its updates (each with
/// its place in `batch`, and what its decision read) and the events of all its changes.
/// Claims come sorted by key and updates by id, so that two batches that touch the same
/// rows take their locks in one order.
fn bind_batch<'a>(batch: &[&'a Listed]) -> Statement<'a> {
    let mut claimed: Vec<&Operation> = Vec::new();
    let mut updated: Vec<(usize, &Unchanged)> = Vec::new();
    let mut events = EventColumns::default();
    for (n, listed) in batch.iter().enumerate() {
        match &listed.change {
            RowChange::NewKeyClaim(operation) => claimed.push(operation),
            RowChange::UnchangedUpdate(unchanged) => updated.push((n, unchanged)),
        }
        for event in &listed.events {
            events.push(n, event);
        }
    }
    claimed.sort_by(|a, b| (&a.namespace, &a.key).cmp(&(&b.namespace, &b.key)));
    updated.sort_by_key(|(_, unchanged)| unchanged.after.id);
    let shape = Shape {
        claims: !claimed.is_empty(),
        updates: !updated.is_empty(),
    };
    let mut statement = sqlx::query(shape.statement());
    if shape.claims {
        let mut claims = (CreatedColumns::default(), UpdatedColumns::default());
        for operation in claimed {
            claims.0.push(CreatedValues::from(operation));
            claims.1.push(UpdatedValues::from(operation));
        }
        statement = claims.1.bind(claims.0.bind(statement));
    }
    if shape.updates {
        let mut updates = (ReadColumns::default(), UpdatedColumns::default());
        for (n, unchanged) in updated {
            updates.0.push(n, unchanged);
            updates.1.push(UpdatedValues::from(&unchanged.after));
        }
        statement = updates.1.bind(updates.0.bind(statement));
    }
    events.bind(statement)
}

/// What an update's decision read of its row, and the update's place in the batch.
#[derive(Default)]
struct ReadColumns {
    n: Vec<i32>,
    id: Vec<Uuid>,
    status: Vec<String>,
    lease_token: Vec<String>,
    updated_at: Vec<DateTime<Utc>>,
}

impl ReadColumns {
    const COUNT: usize = 5;

    fn push(&mut self, n: usize, unchanged: &Unchanged) {
        self.n.push(place(n));
        self.id.push(unchanged.after.id);
        self.status.push(to_text(&unchanged.expected_status));
        self.lease_token.push(unchanged.lease_token.clone());
        self.updated_at.push(unchanged.read_updated_at);
    }

    fn bind(self, statement: Statement<'_>) -> Statement<'_> {
        statement
            .bind(self.n)
            .bind(self.id)
            .bind(self.status)
            .bind(self.lease_token)
            .bind(self.updated_at)
    }
}

/// Which changes a batch has. Each kind of batch has a statement of its own without the
/// parts it does not need, so that claims alone (a lone new key's batch) run none of the
/// updates' parts, which cost a lone claim about a tenth more in PostgreSQL.
#[derive(Clone, Copy)]
struct Shape {
    claims: bool,
    updates: bool,
}

impl Shape {
    /// The batch's statement: one text for every batch of this shape.
    fn statement(self) -> &'static str {
        static STATEMENTS: LazyLock<[String; 3]> = LazyLock::new(|| {
            let shape = |claims, updates| Shape { claims, updates }.write_statement();
            [shape(true, false), shape(false, true), shape(true, true)]
        });
        let n = match (self.claims, self.updates) {
            (true, false) => 0,
            (false, true) => 1,
            _ => 2,
        };
        &STATEMENTS[n]
    }

    /// Its data-modifying `with` parts insert the claims' operations (a key taken holds back
    /// that claim alone), update the reported operations guarded by what each report read,
    /// and insert the events of exactly the changes that applied; it answers which did: a
    /// claim by its operation's id, an update by its place in the batch (two reports of one
    /// operation may meet in a batch; one of them applies).
    fn write_statement(self) -> String {
        // Placeholders numbered on from where the last part's ended.
        let mut next = 1;
        let mut numbered = |count| {
            let list = placeholders(next, count);
            next += count;
            list
        };
        let (mut parts, mut applied, mut filter) = (Vec::new(), Vec::new(), Vec::new());
        if self.claims {
            let claims = numbered(CreatedColumns::COUNT + UpdatedColumns::COUNT);
            parts.push(format!(
                "claimed as (insert into operations ({CREATED_COLUMNS}, {UPDATED_COLUMNS}) \
                 select * from unnest({claims}) on conflict do nothing returning id)"
            ));
            applied.push("select id, null::integer from claimed");
            filter.push("e.operation_id in (select id from claimed)");
        }
        if self.updates {
            let updates = numbered(ReadColumns::COUNT + UpdatedColumns::COUNT);
            let new_values: Vec<String> = UPDATED_COLUMNS
                .split(", ")
                .map(|column| format!("updates.{column}"))
                .collect();
            parts.push(format!(
                "updates (n, id, read_status, read_lease, read_updated_at, {UPDATED_COLUMNS}) \
                 as (select * from unnest({updates})), \
                 updated as (update operations set ({UPDATED_COLUMNS}) = ({}) from updates \
                 where operations.id = updates.id and operations.status = updates.read_status \
                 and operations.lease_token = updates.read_lease \
                 and operations.updated_at = updates.read_updated_at returning updates.n)",
                new_values.join(", ")
            ));
            applied.push("select null::uuid, n from updated");
            filter.push("e.n in (select n from updated)");
        }
        let events = numbered(EventColumns::COUNT);
        parts.push(format!(
            "events as (insert into operation_events (operation_id, at, kind, actor, detail) \
             select operation_id, at, kind, actor, detail \
             from unnest({events}) as e (i, n, operation_id, at, kind, actor, detail) \
             where {} order by i)",
            filter.join(" or ")
        ));
        format!("with {} {}", parts.join(", "), applied.join(" union all "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::backend::SqlBackend as _;
    use crate::storage::conformance::ledger::{fresh, late_completion, request, start};
    use crate::storage::postgres::tests::{migrated, one_connection};
    use crate::storage::testing::{Backend, TestDatabase};
    use app::ledger::{decide_claim, Decision, Write};
    use futures_util::future::join_all;
    use sqlx::{Connection, PgConnection};

    /// A new key's claim of `key`, decided now, as the ledger lists it.
    fn new_key_claim(key: &str) -> Listed {
        let decision = decide_claim(
            None,
            &request("billing", key, "refund"),
            "agent:t",
            fresh(),
            Utc::now(),
        );
        let [Write::Insert(operation)] = decision.writes.as_slice() else {
            panic!("a new key's claim inserts: {:?}", decision.writes);
        };
        Listed {
            change: RowChange::NewKeyClaim(operation.clone()),
            events: decision.state_events(),
        }
    }

    /// A decided report of a pending operation as the ledger lists it.
    fn unchanged_update<T>(before: &Operation, decision: &Decision<T>) -> Listed {
        let [Write::Update {
            after,
            expected_status,
        }] = decision.writes.as_slice()
        else {
            panic!("a report updates: {:?}", decision.writes);
        };
        Listed {
            change: RowChange::UnchangedUpdate(Unchanged {
                after: after.clone(),
                expected_status: *expected_status,
                lease_token: before
                    .lease
                    .as_ref()
                    .unwrap()
                    .token_hash
                    .as_str()
                    .to_owned(),
                read_updated_at: before.updated_at,
            }),
            events: decision.state_events(),
        }
    }

    async fn count(pool: &PgPool, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
    }

    /// Changes sent together are written by one statement; a second claim of a key in the same
    /// batch, and a claim of a key already live, apply not, and write no event.
    #[tokio::test]
    async fn changes_sent_together_share_one_commit_and_apply_each_on_its_own() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        start(&store, &request("billing", "live", "refund")).await;
        let group = &store.0.group_commit;
        let mut listed: Vec<Listed> = (0..20).map(|i| new_key_claim(&format!("k-{i}"))).collect();
        listed.push(new_key_claim("k-3"));
        listed.push(new_key_claim("live"));
        let (commits, changes) = (group.commits(), group.changes());

        let applied: Vec<bool> = join_all(listed.into_iter().map(|l| group.write(l)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();

        assert_eq!(group.commits() - commits, 1, "one statement for the batch");
        assert_eq!(group.changes() - changes, 22);
        assert_eq!(applied.iter().filter(|&&a| a).count(), 20, "{applied:?}");
        assert!(
            applied[3] != applied[20],
            "one claim of k-3 applies: {applied:?}"
        );
        assert!(!applied[21], "the live key is taken");
        let pool = &store.0.pool;
        assert_eq!(count(pool, "select count(*) from operations").await, 21);
        assert_eq!(
            count(pool, "select count(*) from operation_events").await,
            21,
            "one claimed event per operation, none for the claims held back"
        );
        store.0.close().await;
    }

    /// Changes with more rows than one statement writes (`MAX_ROWS`) are
    /// split over several batches, and every one of them applies with all its events.
    #[tokio::test]
    async fn changes_too_many_for_one_statement_are_split_over_batches() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let group = &store.0.group_commit;
        let many_events = |key: &str| {
            let mut listed = new_key_claim(key);
            listed.events = vec![listed.events[0].clone(); 200];
            listed
        };
        let listed: Vec<Listed> = (0..50).map(|i| many_events(&format!("k-{i}"))).collect();
        assert!(listed.iter().map(Listed::rows).sum::<usize>() > MAX_ROWS);
        let commits = group.commits();

        let applied = join_all(listed.into_iter().map(|l| group.write(l))).await;

        assert!(
            applied.into_iter().all(|a| a.unwrap()),
            "every claim applies"
        );
        assert!(group.commits() - commits >= 2, "more than one statement");
        let pool = &store.0.pool;
        assert_eq!(count(pool, "select count(*) from operations").await, 50);
        assert_eq!(
            count(pool, "select count(*) from operation_events").await,
            50 * 200
        );
        store.0.close().await;
    }

    /// Two reports of one pending operation decided from the same read and written in one
    /// batch: one applies, with its events; the other writes nothing.
    #[tokio::test]
    async fn two_reports_of_one_operation_in_a_batch_apply_once() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (before, token) = start(&store, &request("billing", "order-1", "refund")).await;
        let first = unchanged_update(&before, &late_completion(&before, &token, "agent:a"));
        let second = unchanged_update(&before, &late_completion(&before, &token, "agent:b"));
        let group = &store.0.group_commit;
        let commits = group.commits();

        let (a, b) = tokio::join!(group.write(first), group.write(second));

        assert_eq!(group.commits() - commits, 1);
        assert!(a.unwrap() ^ b.unwrap(), "exactly one report applies");
        let actors: Vec<String> = sqlx::query_scalar(
            "select actor from operation_events where operation_id = $1 order by seq",
        )
        .bind(before.id)
        .fetch_all(&store.0.pool)
        .await
        .unwrap();
        assert_eq!(actors.len(), 2, "claimed, then one completion: {actors:?}");
        assert!(matches!(actors[1].as_str(), "agent:a" | "agent:b"));
        store.0.close().await;
    }

    /// A batch PostgreSQL refuses as a whole (here an event of an operation that does not
    /// exist breaks a foreign key) is written again change by change: the others apply, the
    /// broken one alone is refused, and nothing of it is written.
    #[tokio::test]
    async fn a_change_that_breaks_the_batch_is_refused_alone() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (before, token) = start(&store, &request("billing", "order-1", "refund")).await;
        let mut broken = unchanged_update(&before, &late_completion(&before, &token, "agent:b"));
        broken.events[0].operation_id = uuid::Uuid::now_v7();
        let group = &store.0.group_commit;

        let (a, b, c) = tokio::join!(
            group.write(new_key_claim("a")),
            group.write(broken),
            group.write(new_key_claim("c")),
        );

        assert!(a.unwrap() && c.unwrap(), "the others apply");
        assert!(b.is_err(), "the broken change is refused: {b:?}");
        let pool = &store.0.pool;
        assert_eq!(count(pool, "select count(*) from operations").await, 3);
        let status: String = sqlx::query_scalar("select status from operations where id = $1")
            .bind(before.id)
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(status, "pending", "the broken report changed nothing");
        assert_eq!(
            count(pool, "select count(*) from operation_events").await,
            3
        );
        store.0.close().await;
    }

    /// The connection is killed while a batch waits in PostgreSQL (blocked by a lock another
    /// session holds): every change of the batch is answered, none as written, and nothing of
    /// it was committed; the next batch is written on a new connection.
    #[tokio::test]
    async fn a_batch_whose_connection_is_killed_answers_every_change_and_acknowledges_none() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let mut blocker = PgConnection::connect(db.url()).await.unwrap();
        let mut blocking = blocker.begin().await.unwrap();
        sqlx::query("lock table operations in share mode")
            .execute(&mut *blocking)
            .await
            .unwrap();
        let group = store.0.group_commit.clone();
        let batch = tokio::spawn(async move {
            let claims = (0..10).map(|i| group.write(new_key_claim(&format!("k-{i}"))));
            join_all(claims).await
        });

        let killed = kill_blocked_batch(&store.0.pool).await;
        let answers = tokio::time::timeout(std::time::Duration::from_secs(10), batch)
            .await
            .expect("every change is answered")
            .unwrap();
        blocking.rollback().await.unwrap();

        assert!(killed, "the batch's connection was killed");
        assert_eq!(answers.len(), 10);
        for answer in &answers {
            assert!(
                matches!(answer, Err(StoreError::Unavailable(_))),
                "no change is acknowledged: {answer:?}"
            );
        }
        let pool = &store.0.pool;
        assert_eq!(count(pool, "select count(*) from operations").await, 0);
        assert_eq!(
            count(pool, "select count(*) from operation_events").await,
            0
        );
        let again = store.0.group_commit.write(new_key_claim("k-0")).await;
        assert!(again.unwrap(), "the next batch is written");
        assert_eq!(count(pool, "select count(*) from operations").await, 1);
        store.0.close().await;
    }

    /// The batches' statements, planned once per connection, maybe while the table is still
    /// empty (a new database), probe indexes only: no plan of theirs scans a table or joins
    /// by hashing or merging (see `connect_options`).
    #[tokio::test]
    async fn the_batches_plans_made_on_an_empty_table_probe_indexes() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (first, first_token) = start(&store, &request("billing", "order-1", "refund")).await;
        let (second, second_token) = start(&store, &request("billing", "order-2", "refund")).await;
        let pool = one_connection(&db, connect_options).await;
        let group = GroupCommit::start(pool.clone());
        let report = |before: &Operation, token| {
            unchanged_update(before, &late_completion(before, token, "agent:a"))
        };

        let claimed = group.write(new_key_claim("order-3")).await;
        let reported = group.write(report(&first, &first_token)).await;
        let both = tokio::join!(
            group.write(new_key_claim("order-4")),
            group.write(report(&second, &second_token))
        );

        assert!(claimed.unwrap() && reported.unwrap() && both.0.unwrap() && both.1.unwrap());
        // The group keeps the pool's one connection; the queries below need it back.
        group.release_connections();
        let shapes = [(true, false), (false, true), (true, true)];
        for (claims, updates) in shapes {
            let statement = Shape { claims, updates }.statement();
            let (name, parameters): (String, i32) = sqlx::query_as(
                "select name, cardinality(parameter_types) from pg_prepared_statements \
                 where statement = $1",
            )
            .bind(statement)
            .fetch_one(&pool)
            .await
            .unwrap();
            let nulls = vec!["null"; parameters as usize].join(", ");
            let plan: Vec<String> = sqlx::query_scalar(&format!("explain execute {name}({nulls})"))
                .fetch_all(&pool)
                .await
                .unwrap();
            let plan = plan.join("\n");
            assert_eq!(plan.contains("Index Scan"), updates, "{plan}");
            for step in ["Seq Scan", "Hash Join", "Merge Join"] {
                assert!(!plan.contains(step), "{plan}");
            }
        }
        pool.close().await;
        store.0.close().await;
    }

    /// Terminates the backend running a batch's statement once it waits for a lock; whether
    /// it found one within a few seconds.
    async fn kill_blocked_batch(pool: &PgPool) -> bool {
        for _ in 0..200 {
            let killed: Option<bool> = sqlx::query_scalar(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                 where datname = current_database() and wait_event_type = 'Lock' \
                 and query like 'with claimed%'",
            )
            .fetch_optional(pool)
            .await
            .unwrap();
            if killed == Some(true) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        false
    }
}
