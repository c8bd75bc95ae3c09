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

use app::ledger::{Changes, OperationChange};
use app::store_error::StoreError;
use sqlx::{Connection, SqliteConnection, SqlitePool};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use crate::storage::{store_error, Staging};

/// The most changes committed together: bounds how long the last of a batch waits for the
/// ones before it.
const MAX_BATCH: usize = 256;

/// Queues changes for the writer task. Cheap to clone.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<Box<dyn Job>>,
    /// Transactions committed so far; tests read it to see that changes were grouped.
    #[cfg_attr(not(test), allow(dead_code))]
    commits: Arc<AtomicU64>,
}

impl GroupCommit {
    /// Starts the writer on the pool's (single) connection; it publishes committed changes
    /// to `changes`, and stops when the last handle is dropped.
    ///
    /// The writer gets a thread of its own. Each statement is a trip to sqlx's SQLite
    /// thread, and the answer wakes the writer from that foreign thread; on the server's
    /// busy runtime such a wake waits in the shared queue until a worker looks there
    /// (tokio aims at every ~200 µs), so a batch of n changes would wait that long n + 2
    /// times, its fsync aside. On its own thread the writer runs as soon as it is woken.
    pub(crate) fn start(pool: SqlitePool, changes: Changes) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counted = commits.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("idem-sqlite-writer".into())
            .spawn(move || runtime.block_on(run(pool, jobs, changes, counted)))?;
        Ok(Self { queue, commits })
    }

    /// Transactions committed so far (fewer than changes, under load).
    #[cfg(test)]
    fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
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
        let job = Box::new(Pending {
            work,
            output: None,
            reply,
        });
        self.queue.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

fn stopped() -> StoreError {
    StoreError::Backend("the SQLite writer has stopped".into())
}

/// A change waiting for the writer, with its caller's answer erased to fit one queue.
trait Job: Send {
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

impl<T, F> Job for Pending<T, F>
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
        let answer = outcome.and_then(|()| {
            output.ok_or_else(|| StoreError::Backend("a change was committed unstaged".into()))
        });
        // The caller may have gone (its request was cancelled); the change stands.
        let _ = reply.send(answer);
    }
}

async fn run(
    pool: SqlitePool,
    mut queue: mpsc::UnboundedReceiver<Box<dyn Job>>,
    changes: Changes,
    commits: Arc<AtomicU64>,
) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&pool, std::mem::take(&mut batch), &changes, &commits).await;
    }
}

/// Commits the batch together, or else each of its changes alone.
async fn commit_batch(
    pool: &SqlitePool,
    mut batch: Vec<Box<dyn Job>>,
    published: &Changes,
    commits: &AtomicU64,
) {
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(error) => {
            let message = error.to_string();
            for job in batch {
                job.finish(Err(StoreError::Backend(message.clone().into())));
            }
            return;
        }
    };
    match stage_and_commit(&mut conn, &mut batch, commits).await {
        Ok(changes) => {
            for job in batch {
                job.finish(Ok(()));
            }
            publish(published, changes);
        }
        Err(error) if batch.len() == 1 => {
            if let Some(job) = batch.pop() {
                job.finish(Err(error));
            }
        }
        Err(error) => {
            tracing::debug!(%error, size = batch.len(), "a batch failed; committing its changes one by one");
            for job in batch {
                let mut alone = vec![job];
                let outcome = stage_and_commit(&mut conn, &mut alone, commits).await;
                let job = alone.pop().expect("one job");
                match outcome {
                    Ok(changes) => {
                        job.finish(Ok(()));
                        publish(published, changes);
                    }
                    Err(error) => job.finish(Err(error)),
                }
            }
        }
    }
}

async fn stage_and_commit(
    conn: &mut SqliteConnection,
    batch: &mut [Box<dyn Job>],
    commits: &AtomicU64,
) -> Result<Vec<OperationChange>, StoreError> {
    let mut tx = conn
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(store_error)?;
    let mut changes = Vec::new();
    for job in batch.iter_mut() {
        // On an error the transaction is dropped, which rolls it back.
        changes.extend(job.stage(&mut tx).await?);
    }
    tx.commit().await.map_err(store_error)?;
    commits.fetch_add(1, Ordering::Relaxed);
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

    async fn stored(pool: &SqlitePool) -> Vec<i64> {
        sqlx::query_scalar("select n from effects order by n")
            .fetch_all(pool)
            .await
            .expect("read back")
    }

    #[tokio::test]
    async fn changes_queued_together_commit_together_and_each_is_answered() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let pool = one_writer(&db).await;
        let writer = GroupCommit::start(pool.clone(), Changes::new()).unwrap();

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
        let db = TestDatabase::create(Backend::Sqlite).await;
        let pool = one_writer(&db).await;
        let writer = GroupCommit::start(pool.clone(), Changes::new()).unwrap();

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
}
