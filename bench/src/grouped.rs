//! The grouped SQLite floor: the rows idem writes for new keys (as the sequential floor
//! writes them), grouped into one transaction per batch by a writer on a thread of its own
//! that calls SQLite through rusqlite directly, each statement where it is issued. idem's
//! writer groups the same way but hands every statement to the thread of sqlx's
//! connection; the gap between this row and `floor: store claim+complete` is what those
//! hand-overs (and the ledger's own work) cost. Each step is one claim and, once the
//! claim is committed, its completion, as an agent's harness would send them.

use async_trait::async_trait;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::runner::{StepError, Workload};
use super::sequential::{open_durable, write_claim, write_completion};

/// The most writes committed together, as in idem's writer.
const MAX_BATCH: usize = 256;

/// A write the floor's writer commits with others.
enum Write {
    Claim { id: Uuid, key: String },
    Completion { id: Uuid },
}

/// A write and whom to tell once its batch is committed (or failed).
type Queued = (Write, oneshot::Sender<Result<(), String>>);

/// The queue in front of the writer's thread, which ends when this is dropped.
pub struct GroupedSqlite {
    queue: mpsc::Sender<Queued>,
    /// Transactions committed so far.
    #[cfg(test)]
    commits: Arc<AtomicU64>,
    /// Unique per run, so keys never meet earlier runs' keys.
    prefix: String,
}

impl GroupedSqlite {
    /// Opens the migrated database file and starts the writer's thread on it.
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        let connection = open_durable(path)?;
        let (queue, queued) = mpsc::channel();
        let commits = Arc::new(AtomicU64::new(0));
        let counted = commits.clone();
        std::thread::Builder::new()
            .name("bench-grouped-writer".into())
            .spawn(move || write_batches(connection, queued, &counted))
            .expect("a thread for the grouped floor's writer");
        Ok(Self {
            queue,
            #[cfg(test)]
            commits,
            prefix: Uuid::new_v4().simple().to_string(),
        })
    }

    /// Transactions committed so far.
    #[cfg(test)]
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    async fn write(&self, write: Write) -> Result<(), StepError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || StepError::Outcome("the grouped floor's writer stopped".into());
        self.queue.send((write, reply)).map_err(|_| stopped())?;
        answer
            .await
            .map_err(|_| stopped())?
            .map_err(StepError::Outcome)
    }
}

/// Commits what is queued, up to `MAX_BATCH` writes a transaction, until the queue closes.
fn write_batches(
    mut connection: rusqlite::Connection,
    queued: mpsc::Receiver<Queued>,
    commits: &AtomicU64,
) {
    while let Ok(first) = queued.recv() {
        let mut batch = vec![first];
        batch.extend(queued.try_iter().take(MAX_BATCH - 1));
        let outcome = commit(&mut connection, &batch).map_err(|e| e.to_string());
        if outcome.is_ok() {
            commits.fetch_add(1, Ordering::Relaxed);
        }
        for (_, reply) in batch {
            // A caller that gave up no longer listens.
            let _ = reply.send(outcome.clone());
        }
    }
}

/// One transaction for the whole batch: a floor needs no failing write to commit alone.
fn commit(connection: &mut rusqlite::Connection, batch: &[Queued]) -> rusqlite::Result<()> {
    let tx = connection.transaction()?;
    for (write, _) in batch {
        match write {
            Write::Claim { id, key } => write_claim(&tx, *id, key)?,
            Write::Completion { id } => write_completion(&tx, *id)?,
        }
    }
    tx.commit()
}

#[async_trait]
impl Workload for GroupedSqlite {
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError> {
        let id = Uuid::now_v7();
        let key = format!("{}-{task}-{seq}", self.prefix);
        self.write(Write::Claim { id, key }).await?;
        self.write(Write::Completion { id }).await
    }
}
