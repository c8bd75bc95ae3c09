//! Work queued by many requests and done in batches: whatever waits while a batch is under
//! way becomes the next one, so batches grow with the load and a lone job goes at once.
//! Group commit and group reads share this loop; each says how big a batch may be, and each
//! keeps its connections between batches.

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, Semaphore};

/// How much work one batch may take.
pub(super) struct Limits<J> {
    /// Batches under way at once.
    pub(super) in_flight: usize,
    /// The most jobs in a batch.
    pub(super) max_jobs: usize,
    /// The most weight in a batch (a single heavier job still makes a batch of its own).
    pub(super) max_weight: usize,
    /// A job's weight (e.g. the values its rows bind).
    pub(super) weight: fn(&J) -> usize,
}

/// Takes the waiting jobs as one batch whenever fewer than `in_flight` batches are under way
/// and runs `run` on it in a task of its own, until every sender of `jobs` is gone.
pub(super) async fn gather<J, F, Done>(
    mut jobs: mpsc::UnboundedReceiver<J>,
    limits: Limits<J>,
    run: F,
) where
    J: Send + 'static,
    F: Fn(Vec<J>) -> Done,
    Done: Future<Output = ()> + Send + 'static,
{
    let in_flight = Arc::new(Semaphore::new(limits.in_flight));
    // A job that did not fit the last batch: the first of the next.
    let mut carried: Option<J> = None;
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let first = match carried.take() {
            Some(job) => job,
            None => match jobs.recv().await {
                Some(job) => job,
                None => return,
            },
        };
        let mut weight = (limits.weight)(&first);
        let mut batch = vec![first];
        while batch.len() < limits.max_jobs {
            let Ok(job) = jobs.try_recv() else {
                break;
            };
            weight += (limits.weight)(&job);
            if weight > limits.max_weight {
                carried = Some(job);
                break;
            }
            batch.push(job);
        }
        let done = run(batch);
        tokio::spawn(async move {
            done.await;
            drop(permit);
        });
    }
}

/// The connections a kind of batch runs on, kept between its batches. sqlx's pool tests a
/// connection with a round trip to the server when it is lent and again when it comes back,
/// and a batch is one statement: two trips per statement, a large share of what a batch
/// costs idem and PostgreSQL besides its own work. A connection whose statement failed is
/// not kept: it goes back to the pool, whose test closes it if it broke. Each batch under
/// way holds at most one connection at a time, so no batch waits for the pool while a
/// connection sits kept.
pub(super) struct KeptConnections {
    pool: PgPool,
    idle: Mutex<Vec<PoolConnection<Postgres>>>,
    /// Set once the store closes: from then on every connection goes back to the pool, which
    /// waits for all of them before it closes.
    released: AtomicBool,
}

impl KeptConnections {
    pub(super) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            idle: Mutex::default(),
            released: AtomicBool::new(false),
        }
    }

    /// A kept connection, or else one from the pool.
    pub(super) async fn take(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let kept = self.idle.lock().expect("never held across a panic").pop();
        match kept {
            Some(connection) => Ok(connection),
            None => self.pool.acquire().await,
        }
    }

    /// Keeps `connection` for the next batch (unless the connections were released).
    pub(super) fn keep(&self, connection: PoolConnection<Postgres>) {
        let mut idle = self.idle.lock().expect("never held across a panic");
        if !self.released.load(Ordering::SeqCst) {
            idle.push(connection);
        }
    }

    /// Gives every kept connection back to the pool, now and from now on.
    pub(super) fn release(&self) {
        let mut idle = self.idle.lock().expect("never held across a panic");
        self.released.store(true, Ordering::SeqCst);
        idle.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::{Backend, TestDatabase};
    use sqlx::postgres::PgPoolOptions;

    async fn backend_of(connection: &mut PoolConnection<Postgres>) -> i32 {
        sqlx::query_scalar("select pg_backend_pid()")
            .fetch_one(&mut **connection)
            .await
            .unwrap()
    }

    /// A kept connection serves the next batch without going back to the pool; once
    /// released, every connection goes back, so that the pool can close.
    #[tokio::test]
    async fn connections_are_kept_between_batches_until_released() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect(db.url())
            .await
            .unwrap();
        let kept = KeptConnections::new(pool.clone());

        let mut first = kept.take().await.unwrap();
        let backend = backend_of(&mut first).await;
        kept.keep(first);
        assert_eq!(pool.num_idle(), 0, "kept, not returned to the pool");
        let mut again = kept.take().await.unwrap();
        assert_eq!(backend_of(&mut again).await, backend, "the same connection");

        kept.release();
        kept.keep(again);
        assert!(
            kept.idle.lock().unwrap().is_empty(),
            "not kept once released"
        );
        tokio::time::timeout(std::time::Duration::from_secs(10), pool.close())
            .await
            .expect("every connection went back to the pool");
    }
}
