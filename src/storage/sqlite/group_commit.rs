//! SQLite's one writer, committing the changes that queue up while it is busy in one
//! transaction (group commit).
//!
//! With `synchronous=FULL` every commit waits for an fsync, and one writer can do only so
//! many of those a second; under load the fsync, not the work, is the limit. So the writer
//! takes every change that is waiting, stages them one after another in one `BEGIN
//! IMMEDIATE` transaction, commits once, and only then answers each caller: every
//! acknowledgement still follows its own durable commit. A change staged later in a batch
//! sees the earlier ones (same connection), so the order is the order of a single writer.
//!
//! A change that fails while staging must not take the others with it: the batch is rolled
//! back and each of its changes is committed alone, so each gets its own answer.
//!
//! Each statement sqlx runs is a trip to sqlx's SQLite thread and back (a thread woken, a
//! thread parked), which costs more than many a statement's own work. So a change that is
//! only rows to write with no read between them (a new key's claim, a completion decided
//! from a read) says so (`Listed`), and the writer stages the listed changes that have the
//! same shape together: each of the shape's statements once, with the rows of all of them
//! (a multi-row insert, an `update … from (values …)`). And it runs those statements itself,
//! on the connection's handle borrowed from sqlx's thread (`direct`): one trip for a run of
//! batches. A batch of listed changes only — the commonest under load — runs its whole
//! transaction that way; a batch with changes staged by code of their own runs them through
//! sqlx in sqlx's transaction first. The changes of one batch are all still unanswered, so none of
//! their callers can have relied on another's outcome: any order of them is an order a
//! single writer could have taken, and the writer takes the listed ones after the others,
//! grouped by shape. Lists come in lengths 1, 2, 4 … 64 changes, so a batch has few texts to
//! prepare. A list either applies every change's rows or it is refused as a whole: the
//! batch is rolled back and its changes are committed one by one, where each is answered on
//! its own (a list of one may also find its guard held it back). Except where each change of
//! a shape applies or not on its own and can say which it did (an insert that does nothing
//! when its key is taken): a list of those whose counts fall short asks, in one more query,
//! which of its changes applied.

use app::ledger::{Changes, OperationChange};
use app::store_error::StoreError;
use futures_util::FutureExt;
use sqlx::{Connection, SqliteConnection, SqlitePool};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use super::direct::{direct_error, with_handle, BorrowedHandle};
use super::lists::{stage_list, Listed, ListedRows};
use crate::storage::{store_error, Staging};

/// The most changes committed together: bounds how long the last of a batch waits for the
/// ones before it.
const MAX_BATCH: usize = 256;

/// The most batches committed on one hold of the pool's (one) connection, back to back
/// while changes keep coming: its other users (touches of API keys and sessions, the
/// metrics roll-up, the audit log) wait for the writer no longer than this many commits
/// (and a `LINGER`). Each hold prepares its lists' texts afresh, so a longer hold spreads
/// that cost over more batches.
const HOLD_BATCHES: usize = 64;

/// How long the writer, its queue empty, keeps the connection's handle waiting for more
/// listed changes before it gives it back (see [`Writer::commit_listed_on`]).
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// The most listed changes staged in one list (a power of two; see the module's note). A
/// new key's claim binds 29 values and its event 5: 64 of them stay far below SQLite's limit
/// of 32,766 per statement.
const MAX_LIST: usize = 64;

/// The pause before the writer's first restart after a panic; it doubles with each panic.
const FIRST_RESTART_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
/// The longest pause between restarts of a writer that keeps panicking.
const LONGEST_RESTART_PAUSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Queues changes for the writer task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<Job>,
    /// Whether the writer is down (it panicked and has not restarted yet).
    down: Arc<AtomicBool>,
    /// What the writer did so far; tests read it to see that changes were grouped.
    #[cfg_attr(not(test), allow(dead_code))]
    counts: Arc<Counts>,
}

impl GroupCommit {
    /// Starts the writer on the pool's (single) connection; it publishes committed changes
    /// to `changes`, and stops when the last handle is dropped.
    ///
    /// The writer gets a thread of its own. Each trip to sqlx's SQLite thread ends with an
    /// answer that wakes the writer from that foreign thread; on the server's busy runtime
    /// such a wake waits in the shared queue until a worker looks there (tokio aims at
    /// every ~200 µs), once per trip. On its own thread the writer runs as soon as it is
    /// woken, and blocking it while it runs a batch's statements (and waits for the commit's
    /// fsync) directly holds up nothing else.
    pub(crate) fn start(pool: SqlitePool, changes: Changes) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let counted = counts.clone();
        let down = Arc::new(AtomicBool::new(false));
        let reported = down.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("idem-sqlite-writer".into())
            .spawn(move || {
                let writer = Writer {
                    pool,
                    queue: jobs,
                    published: changes,
                    counts: counted,
                    batch: Vec::with_capacity(MAX_BATCH),
                };
                runtime.block_on(writer.run_supervised(reported))
            })?;
        Ok(Self {
            queue,
            down,
            counts,
        })
    }

    /// Whether the writer is down now (between a panic and its restart).
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Transactions committed so far (fewer than changes, under load).
    #[cfg(test)]
    fn commits(&self) -> u64 {
        self.counts.commits.load(Ordering::Relaxed)
    }

    /// Lists of listed changes staged so far (fewer than such changes, under load).
    #[cfg(test)]
    pub(super) fn lists(&self) -> u64 {
        self.counts.lists.load(Ordering::Relaxed)
    }

    /// Runs `work` in the writer's transaction and answers once it is committed. `work` may
    /// run more than once (a batch that failed is retried change by change), so it must
    /// only read and write through the connection it is given.
    pub(crate) async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job::Staged(Box::new(Pending {
            work,
            output: None,
            reply,
        }));
        self.queue.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Stages `change`, a list of statements, in the writer's transaction (with others of
    /// the same shape, in one list) and answers once it is committed.
    pub(crate) async fn write_listed<L: Listed>(&self, change: L) -> Result<L::Output, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Listed(Box::new(ListedPending {
            change,
            output: None,
            reply,
        }));
        self.queue.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// What the writer did, counted.
#[derive(Default)]
struct Counts {
    /// Transactions committed.
    commits: AtomicU64,
    /// Lists of listed changes staged (in transactions committed or not).
    lists: AtomicU64,
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the SQLite writer has stopped".into())
}

/// A change waiting for the writer, with its caller's answer erased to fit one queue.
enum Job {
    /// Staged on its own: it may read, and decide as it goes.
    Staged(Box<dyn StagedJob>),
    /// Staged in a list with others of the same shape.
    Listed(Box<dyn ListedJob>),
}

impl Job {
    fn is_staged(&self) -> bool {
        matches!(self, Job::Staged(_))
    }

    fn finish(self, outcome: Result<(), StoreError>) {
        match self {
            Job::Staged(job) => job.finish(outcome),
            Job::Listed(job) => job.finish(outcome),
        }
    }
}

trait StagedJob: Send {
    /// Stages the change in the open transaction; may be called again after a rollback.
    fn stage<'c>(
        &'c mut self,
        conn: &'c mut SqliteConnection,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<OperationChange>, StoreError>> + Send + 'c>>;

    /// Answers the caller: `Ok` once the staged change is committed, or why it is not.
    fn finish(self: Box<Self>, outcome: Result<(), StoreError>);
}

struct Pending<T, F> {
    work: F,
    output: Option<T>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> StagedJob for Pending<T, F>
where
    T: Send + 'static,
    F: for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, T> + Send + 'static,
{
    fn stage<'c>(
        &'c mut self,
        conn: &'c mut SqliteConnection,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<OperationChange>, StoreError>> + Send + 'c>> {
        Box::pin(async move {
            let (output, changes) = (self.work)(conn).await?;
            self.output = Some(output);
            Ok(changes)
        })
    }

    fn finish(self: Box<Self>, outcome: Result<(), StoreError>) {
        let Pending { output, reply, .. } = *self;
        answer(reply, output, outcome);
    }
}

/// Answers a change's caller: its output once committed, or why not.
fn answer<T>(
    reply: oneshot::Sender<Result<T, StoreError>>,
    output: Option<T>,
    outcome: Result<(), StoreError>,
) {
    let answer = outcome.and_then(|()| {
        output.ok_or_else(|| StoreError::Backend("a change was committed unstaged".into()))
    });
    // The caller may have gone (its request was cancelled); the change stands.
    let _ = reply.send(answer);
}

trait ListedJob: Send {
    fn rows(&self) -> &dyn ListedRows;
    /// Takes the change's answer; may be called again after a rollback.
    fn take(&mut self, applied: bool) -> Vec<OperationChange>;
    fn finish(self: Box<Self>, outcome: Result<(), StoreError>);
}

struct ListedPending<L: Listed> {
    change: L,
    output: Option<L::Output>,
    reply: oneshot::Sender<Result<L::Output, StoreError>>,
}

impl<L: Listed> ListedJob for ListedPending<L> {
    fn rows(&self) -> &dyn ListedRows {
        &self.change
    }

    fn take(&mut self, applied: bool) -> Vec<OperationChange> {
        let (output, changes) = self.change.answer(applied);
        self.output = Some(output);
        changes
    }

    fn finish(self: Box<Self>, outcome: Result<(), StoreError>) {
        let ListedPending { output, reply, .. } = *self;
        answer(reply, output, outcome);
    }
}

/// The writer task: takes the changes that wait, commits them, answers their callers.
struct Writer {
    pool: SqlitePool,
    queue: mpsc::UnboundedReceiver<Job>,
    published: Changes,
    counts: Arc<Counts>,
    /// The changes taken from the queue and not yet committed.
    batch: Vec<Job>,
}

impl Writer {
    /// Runs until every handle is dropped. A panic while writing a batch is logged, the
    /// batch's callers hear that the database is unavailable (it was not committed: its
    /// transaction ends with the connection's drop), and the writer starts again after a
    /// pause, with `down` set meanwhile.
    async fn run_supervised(mut self, down: Arc<AtomicBool>) {
        let mut pause = FIRST_RESTART_PAUSE;
        loop {
            let ran = std::panic::AssertUnwindSafe(self.run())
                .catch_unwind()
                .await;
            let Err(panic) = ran else { return };
            down.store(true, Ordering::Relaxed);
            let message = crate::workers::panic_message(panic);
            tracing::error!(panic = %message, pause_ms = pause.as_millis() as u64,
                "the SQLite writer panicked; its batch was not committed; restarting it");
            refuse(std::mem::take(&mut self.batch), stopped());
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_RESTART_PAUSE);
            down.store(false, Ordering::Relaxed);
        }
    }

    async fn run(&mut self) {
        loop {
            if self.batch.is_empty() {
                let Some(first) = self.queue.recv().await else {
                    return;
                };
                self.batch.push(first);
                self.take_waiting();
            }
            match self.pool.acquire().await {
                Ok(mut conn) => self.hold(&mut conn).await,
                Err(error) => refuse(std::mem::take(&mut self.batch), store_error(error)),
            }
        }
    }

    /// Adds the changes waiting in the queue to the batch, up to `MAX_BATCH`.
    fn take_waiting(&mut self) {
        while self.batch.len() < MAX_BATCH {
            match self.queue.try_recv() {
                Ok(job) => self.batch.push(job),
                Err(_) => break,
            }
        }
    }

    /// Commits batches on the pool's connection while more keep waiting, up to
    /// `HOLD_BATCHES`; a batch left over waits for the next hold.
    async fn hold(&mut self, conn: &mut SqliteConnection) {
        let mut committed = 0;
        while committed < HOLD_BATCHES && !self.batch.is_empty() {
            committed += if self.batch.iter().any(Job::is_staged) {
                self.commit_batch(conn).await;
                1
            } else {
                self.commit_listed_batches(conn, HOLD_BATCHES - committed)
                    .await
            };
            if self.batch.is_empty() {
                self.take_waiting();
            }
        }
    }

    /// Commits the batch, which holds changes staged by code of their own, together, or
    /// else each of its changes alone.
    async fn commit_batch(&mut self, conn: &mut SqliteConnection) {
        let mut batch = std::mem::take(&mut self.batch);
        let outcome = stage_and_commit(conn, &mut batch, &self.counts).await;
        let Some(retried) = settle(batch, outcome, &self.published) else {
            return;
        };
        for job in retried {
            let mut alone = vec![job];
            let outcome = stage_and_commit(conn, &mut alone, &self.counts).await;
            settle(alone, outcome, &self.published);
        }
    }

    /// Commits batches of listed changes only (the commonest under load), back to back
    /// while the queue has more of them waiting, up to `budget`, all in one borrowing of
    /// the connection's handle: one hand-off to sqlx's thread for them all, and each text
    /// of their lists prepared once. Each batch's whole transaction runs directly, and
    /// nothing awaits between its `BEGIN` and its `COMMIT` or `ROLLBACK`, so the connection
    /// never goes back to sqlx inside one. Returns how many batches were committed (a batch
    /// whose handle could not be borrowed counts: its changes were answered); the batch
    /// left over, if any, has changes of other kinds or has to wait for the next hold.
    ///
    /// But sqlx may hand the connection over inside a transaction: one dropped unfinished
    /// (by a change that failed in [`stage_and_commit`], or by other code on the pool's
    /// connection) is rolled back by a message sqlx sends its thread without waiting for it.
    /// That thread gives the handle up for each borrowing and takes it back a moment later;
    /// a borrowing in that moment gets it before the thread has read the messages sent
    /// since. So a transaction found open is one sqlx is about to roll back: a ping, which
    /// sqlx's thread answers after the messages before it, lets it do so, and the handle is
    /// borrowed again.
    async fn commit_listed_batches(&mut self, conn: &mut SqliteConnection, budget: usize) -> usize {
        let mut pinged = false;
        loop {
            let borrowed = match BorrowedHandle::of(conn).await {
                Ok(borrowed) => borrowed,
                Err(error) => {
                    refuse(std::mem::take(&mut self.batch), error);
                    return 1;
                }
            };
            if pinged || borrowed.direct().is_autocommit() {
                return self.commit_listed_on(borrowed.direct(), budget).await;
            }
            drop(borrowed);
            pinged = true;
            if let Err(error) = conn.ping().await {
                refuse(std::mem::take(&mut self.batch), store_error(error));
                return 1;
            }
        }
    }

    /// See [`Writer::commit_listed_batches`]. When the queue runs dry, waits a moment for
    /// more (`LINGER`) before the handle goes back: under load the next change is on its
    /// way, and a borrowing that goes on keeps its statements prepared.
    async fn commit_listed_on(&mut self, direct: &rusqlite::Connection, budget: usize) -> usize {
        let mut committed = 0;
        loop {
            let batch = std::mem::take(&mut self.batch);
            commit_listed_batch(direct, batch, &self.published, &self.counts);
            committed += 1;
            if committed == budget {
                return committed;
            }
            self.take_waiting();
            if self.batch.is_empty() {
                match tokio::time::timeout(LINGER, self.queue.recv()).await {
                    Ok(Some(job)) => {
                        self.batch.push(job);
                        self.take_waiting();
                    }
                    _ => return committed,
                }
            }
            if self.batch.iter().any(Job::is_staged) {
                return committed;
            }
        }
    }
}

/// Refuses every change of a batch that could not be staged at all.
fn refuse(batch: Vec<Job>, error: StoreError) {
    for job in batch {
        job.finish(Err(error.repeated()));
    }
}

/// Answers a batch's changes once it is committed, or its one change's caller why not;
/// a failed batch of several is handed back, to be committed change by change.
fn settle(
    batch: Vec<Job>,
    outcome: Result<Vec<OperationChange>, StoreError>,
    published: &Changes,
) -> Option<Vec<Job>> {
    match outcome {
        Ok(changes) => {
            for job in batch {
                job.finish(Ok(()));
            }
            publish(published, changes);
            None
        }
        Err(error) if batch.len() == 1 => {
            if let Some(job) = batch.into_iter().next() {
                job.finish(Err(error));
            }
            None
        }
        Err(error) => {
            tracing::debug!(%error, size = batch.len(), "a batch failed; committing its changes one by one");
            Some(batch)
        }
    }
}

/// A batch with changes staged by code of their own: sqlx runs its transaction and those
/// changes, and the listed ones go directly, in the same transaction, after them.
async fn stage_and_commit(
    conn: &mut SqliteConnection,
    batch: &mut [Job],
    counts: &Counts,
) -> Result<Vec<OperationChange>, StoreError> {
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(store_error)?;
    let mut changes = Vec::new();
    let mut listed = Vec::new();
    for job in batch.iter_mut() {
        // On an error the transaction is dropped, which rolls it back.
        match job {
            Job::Staged(job) => changes.extend(job.stage(&mut tx).await?),
            Job::Listed(job) => listed.push(job),
        }
    }
    if !listed.is_empty() {
        changes.extend(with_handle(&mut tx, |direct| stage_listed(direct, listed, counts)).await?);
    }
    tx.commit().await.map_err(store_error)?;
    counts.commits.fetch_add(1, Ordering::Relaxed);
    Ok(changes)
}

/// Commits a batch of listed changes only, together, or else each of them alone.
fn commit_listed_batch(
    direct: &rusqlite::Connection,
    mut batch: Vec<Job>,
    published: &Changes,
    counts: &Counts,
) {
    let outcome = commit_listed(direct, &mut batch, counts);
    let Some(retried) = settle(batch, outcome, published) else {
        return;
    };
    for job in retried {
        let mut alone = vec![job];
        let outcome = commit_listed(direct, &mut alone, counts);
        settle(alone, outcome, published);
    }
}

/// Stages and commits listed changes in a transaction of their own, run directly.
fn commit_listed(
    direct: &rusqlite::Connection,
    batch: &mut [Job],
    counts: &Counts,
) -> Result<Vec<OperationChange>, StoreError> {
    app::ledger::failpoint::panic_if_armed("sqlite_writer_listed_batch");
    direct
        .execute_batch("BEGIN IMMEDIATE")
        .map_err(direct_error)?;
    let listed = batch
        .iter_mut()
        .filter_map(|job| match job {
            Job::Listed(job) => Some(job),
            Job::Staged(_) => None,
        })
        .collect();
    let committed = stage_listed(direct, listed, counts).and_then(|changes| {
        direct.execute_batch("COMMIT").map_err(direct_error)?;
        Ok(changes)
    });
    // A failed statement or commit may leave the transaction open (SQLite rolls some
    // failures back itself): end it, so the connection goes back to sqlx as it came.
    if committed.is_err() && !direct.is_autocommit() {
        if let Err(error) = direct.execute_batch("ROLLBACK") {
            tracing::warn!(%error, "rolling back a failed batch failed");
        }
    }
    if committed.is_ok() {
        counts.commits.fetch_add(1, Ordering::Relaxed);
    }
    committed
}

/// Stages the listed changes, those of the same shape together, in lists of up to
/// `MAX_LIST` changes (a power of two each).
fn stage_listed(
    direct: &rusqlite::Connection,
    mut listed: Vec<&mut Box<dyn ListedJob>>,
    counts: &Counts,
) -> Result<Vec<OperationChange>, StoreError> {
    listed.sort_by_key(|job| job.rows().shape());
    let mut changes = Vec::new();
    for same_shape in listed.chunk_by_mut(|a, b| a.rows().shape() == b.rows().shape()) {
        let mut rest = same_shape;
        while !rest.is_empty() {
            let length = MAX_LIST.min(1 << rest.len().ilog2());
            let (list, after) = rest.split_at_mut(length);
            let rows: Vec<&dyn ListedRows> = list.iter().map(|job| job.rows()).collect();
            let applied = stage_list(direct, &rows)?;
            for (job, applied) in list.iter_mut().zip(applied) {
                changes.extend(job.take(applied));
            }
            counts.lists.fetch_add(1, Ordering::Relaxed);
            rest = after;
        }
    }
    Ok(changes)
}

fn publish(published: &Changes, changes: Vec<OperationChange>) {
    for change in changes {
        published.publish(change);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::push_sql::PushSql;
    use crate::storage::sqlite::direct::DirectStatement;
    use crate::storage::sqlite::lists::Shape;
    use crate::storage::testing::{Backend, TestDatabase};
    use sqlx::sqlite::SqlitePoolOptions;

    async fn one_writer(db: &TestDatabase) -> SqlitePool {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect(&format!("{}?mode=rwc", db.url()))
            .await
            .expect("open the file");
        sqlx::query("create table effects (n integer primary key)")
            .execute(&pool)
            .await
            .expect("create the table");
        pool
    }

    /// A fresh file, its one connection and a writer on it (the file goes with the first).
    async fn started() -> (TestDatabase, SqlitePool, GroupCommit) {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let pool = one_writer(&db).await;
        let writer = GroupCommit::start(pool.clone(), Changes::new()).unwrap();
        (db, pool, writer)
    }

    fn insert(n: i64) -> impl for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, i64> {
        move |tx| {
            Box::pin(async move {
                sqlx::query("insert into effects (n) values ($1)")
                    .bind(n)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                Ok((n, Vec::new()))
            })
        }
    }

    /// A listed change: inserts `n` and then `n + 1000` (unless there); applied only if
    /// both statements changed one row.
    struct ListedInsert(i64);

    impl ListedRows for ListedInsert {
        fn shape(&self) -> Shape {
            ("insert n and n + 1000", 0)
        }

        fn statements(&self) -> usize {
            2
        }

        fn push_head(&self, index: usize, sql: &mut DirectStatement<'_>) {
            sql.push(match index {
                0 => "insert into effects (n) values ",
                _ => "insert or ignore into effects (n) values ",
            });
        }

        fn push_rows<'a>(&'a self, index: usize, sql: &mut DirectStatement<'a>) {
            let n = if index == 0 { self.0 } else { self.0 + 1000 };
            sql.push("(").push_bind(n).push(")");
        }

        fn push_tail(&self, _: usize, _: u64, _: &mut DirectStatement<'_>) {}

        fn rows(&self, _: usize) -> u64 {
            1
        }
    }

    impl Listed for ListedInsert {
        type Output = Option<i64>;

        fn answer(&self, applied: bool) -> (Option<i64>, Vec<OperationChange>) {
            (applied.then_some(self.0), Vec::new())
        }
    }

    async fn stored(pool: &SqlitePool) -> Vec<i64> {
        sqlx::query_scalar("select n from effects order by n")
            .fetch_all(pool)
            .await
            .expect("read back")
    }

    #[tokio::test]
    async fn changes_queued_together_commit_together_and_each_is_answered() {
        let (_db, pool, writer) = started().await;

        // All queued before the writer task first runs (one thread): one batch.
        let answers =
            futures_util::future::join_all((0..50).map(|n| writer.write(insert(n)))).await;

        let answered: Vec<i64> = answers.into_iter().map(|a| a.expect("committed")).collect();
        assert_eq!(answered, (0..50).collect::<Vec<_>>());
        assert_eq!(stored(&pool).await, answered, "every answer was committed");
        assert!(
            writer.commits() < 50,
            "50 queued changes took {} commits",
            writer.commits()
        );
    }

    #[tokio::test]
    async fn a_failing_change_fails_alone_and_the_rest_of_its_batch_commits() {
        let (_db, pool, writer) = started().await;

        // The fourth change inserts the second's row again.
        let changes = [1, 2, 3, 2, 5].map(|n| writer.write(insert(n)));
        let answers = futures_util::future::join_all(changes).await;

        assert!(
            matches!(answers[3], Err(StoreError::Conflict)),
            "{answers:?}"
        );
        for (i, answer) in answers.iter().enumerate().filter(|(i, _)| *i != 3) {
            assert!(answer.is_ok(), "change {i}: {answer:?}");
        }
        assert_eq!(stored(&pool).await, [1, 2, 3, 5]);
    }

    #[tokio::test]
    async fn listed_changes_queued_together_go_in_few_lists_and_each_is_answered() {
        let (_db, pool, writer) = started().await;

        let listed = (0..50).map(|n| writer.write_listed(ListedInsert(n)));
        let answers = futures_util::future::join_all(listed).await;

        let answered: Vec<i64> = answers
            .into_iter()
            .map(|a| a.expect("committed").expect("applied"))
            .collect();
        assert_eq!(answered, (0..50).collect::<Vec<_>>());
        let expected: Vec<i64> = (0..50).chain(1000..1050).collect();
        assert_eq!(
            stored(&pool).await,
            expected,
            "every statement of every answer"
        );
        // One batch of 50 would be lists of 32, 16 and 2; the writer may start before all
        // are queued, so only "far fewer than one each" is certain.
        assert!(
            writer.lists() < 25,
            "50 listed changes took {} lists",
            writer.lists()
        );
    }

    #[tokio::test]
    async fn a_failing_listed_change_fails_alone_beside_changes_of_both_kinds() {
        let (_db, pool, writer) = started().await;

        // The fourth listed change inserts the second's rows again; staged changes between.
        let listed = [1, 2, 3, 2, 5].map(|n| writer.write_listed(ListedInsert(n)));
        let staged = [7, 8].map(|n| writer.write(insert(n)));
        let (listed, staged) = futures_util::future::join(
            futures_util::future::join_all(listed),
            futures_util::future::join_all(staged),
        )
        .await;

        assert!(matches!(listed[3], Err(StoreError::Conflict)), "{listed:?}");
        for (i, answer) in listed.iter().enumerate().filter(|(i, _)| *i != 3) {
            assert!(answer.is_ok(), "listed change {i}: {answer:?}");
        }
        assert!(staged.iter().all(Result::is_ok), "{staged:?}");
        assert_eq!(
            stored(&pool).await,
            [1, 2, 3, 5, 7, 8, 1001, 1002, 1003, 1005]
        );
    }

    /// A listed change, queued as the writer queues it, and its answer.
    fn listed_job(n: i64) -> (Job, oneshot::Receiver<Result<Option<i64>, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        let job = Job::Listed(Box::new(ListedPending {
            change: ListedInsert(n),
            output: None,
            reply,
        }));
        (job, answer)
    }

    /// sqlx rolls back a transaction dropped unfinished by a message it does not wait for;
    /// a batch of listed changes that borrows the handle right after must not find that
    /// transaction open (its `BEGIN` would fail) nor commit inside it (the rollback would
    /// then undo it). Repeated, because whether sqlx's thread has read the message yet is
    /// a race.
    #[tokio::test]
    async fn a_listed_batch_right_after_a_dropped_transaction_commits_on_its_own() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let pool = one_writer(&db).await;
        let mut conn = pool.acquire().await.unwrap();
        let (_queue, jobs) = mpsc::unbounded_channel();
        let mut writer = Writer {
            pool: pool.clone(),
            queue: jobs,
            published: Changes::new(),
            counts: Arc::default(),
            batch: Vec::new(),
        };

        for n in 0..200 {
            let mut dropped = conn.begin().await.unwrap();
            sqlx::query("insert into effects (n) values (-1)")
                .execute(&mut *dropped)
                .await
                .unwrap();
            with_handle(&mut dropped, |_| Ok(())).await.unwrap();
            drop(dropped);

            let (job, answer) = listed_job(n);
            writer.batch.push(job);
            assert_eq!(writer.commit_listed_batches(&mut conn, 1).await, 1);
            let answer = answer.await.unwrap();
            assert!(
                matches!(answer, Ok(Some(m)) if m == n),
                "round {n}: {answer:?}"
            );
        }
        drop(conn);

        let expected: Vec<i64> = (0..200).chain(1000..1200).collect();
        assert_eq!(stored(&pool).await, expected, "every batch, no dropped row");
    }

    /// The writer keeps the pool's one connection while changes keep coming, but not for
    /// ever: another user of the pool gets it after a few batches, not after the backlog.
    #[tokio::test]
    async fn the_pools_other_users_get_the_connection_while_changes_keep_coming() {
        let (_db, pool, writer) = started().await;
        const BACKLOG: i64 = 40_000;

        // Changes 2000 apart: each writes n and n + 1000, no two the same row.
        let backlog = tokio::spawn({
            let writer = writer.clone();
            async move {
                let listed = (0..BACKLOG).map(|n| writer.write_listed(ListedInsert(n * 2000)));
                futures_util::future::join_all(listed).await
            }
        });
        while writer.commits() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let mut conn = pool.acquire().await.unwrap();
        let committed: i64 = sqlx::query_scalar("select count(*) from effects where n % 2000 = 0")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        drop(conn);

        assert!(
            committed < BACKLOG,
            "the connection came only after the whole backlog ({committed} changes)"
        );
        let answers = backlog.await.unwrap();
        assert!(answers.iter().all(|answer| matches!(answer, Ok(Some(_)))));
    }

    /// A list whose statements changed fewer rows than its changes write is rolled back and
    /// its changes are committed one by one: one whose second statement changes nothing is
    /// refused, alone.
    #[tokio::test]
    async fn a_listed_change_that_changes_too_few_rows_is_refused_alone() {
        let (_db, pool, writer) = started().await;
        sqlx::query("insert into effects (n) values (1003)")
            .execute(&pool)
            .await
            .unwrap();

        // 3's second insert finds its row there and changes nothing.
        let listed = [1, 2, 3, 4].map(|n| writer.write_listed(ListedInsert(n)));
        let answers = futures_util::future::join_all(listed).await;

        assert!(matches!(answers[2], Err(StoreError::Stale)), "{answers:?}");
        for i in [0, 1, 3] {
            assert!(answers[i].is_ok(), "listed change {i}: {:?}", answers[i]);
        }
        assert_eq!(stored(&pool).await, [1, 2, 4, 1001, 1002, 1003, 1004]);
    }
}
