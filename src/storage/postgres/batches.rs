//! Work queued by many requests and done in batches: whatever waits while a batch is under
//! way becomes the next one, so batches grow with the load and a lone job goes at once.
//! Group commit and group reads share this loop; each says how big a batch may be.

use std::future::Future;
use std::sync::Arc;
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
