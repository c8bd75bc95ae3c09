//! Operation changes announced to every process once they have committed: a queue per
//! process and one task that sends what has gathered as one notification, a JSON array of
//! changes, with at most one notification in flight. Writing transactions then never
//! notify (a transaction that does queues on a lock through its commit, so concurrent
//! commits could not share a flush), and at high rates one notification carries many changes.
//!
//! Under load, notifications are spaced (`SPACING`): each costs PostgreSQL a transaction
//! and a wake-up of every listening connection, and each process parses every one, so a
//! few large ones are cheaper than many small. A change after a quiet spell goes at once.
//!
//! A change that committed but was not announced (the process died in between, or the
//! database refused the notification) is missed by live views until their next change or
//! refresh; a claim waiting for an operation to settle (`Prefer: wait`) re-reads it every
//! few seconds anyway. What keeps final outcomes in memory does not depend on this: changes
//! that replace one are still announced inside their transaction (the migration
//! `announce_after_commit`).

use app::ledger::OperationChange;
use sqlx::postgres::PgPool;
use std::future::Future;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

/// The most bytes of one notification's payload; PostgreSQL refuses 8000 and more.
const MAX_PAYLOAD: usize = 7900;

/// The shortest time from one notification to the next, unless the last was full: the
/// changes committed meanwhile gather into the next. Live views and waiting claims hear of
/// a change at most this much later.
const SPACING: Duration = Duration::from_millis(5);

/// What the announcing task is handed.
enum Queued {
    Change(OperationChange),
    /// Answered once every change queued before it has been sent.
    Flush(oneshot::Sender<()>),
}

/// Hands committed changes to the process's announcing task. Cheap to clone.
#[derive(Clone)]
pub(super) struct Announcer {
    queue: UnboundedSender<Queued>,
}

impl Announcer {
    /// Starts the task that announces on `channel`; it ends when every `Announcer` is gone.
    pub(super) fn start(pool: PgPool, channel: &'static str) -> Self {
        let (queue, queued) = unbounded_channel();
        tokio::spawn(announce(queued, pool, channel));
        Self { queue }
    }

    /// Queues changes that have committed, in the order they should be heard.
    pub(super) fn announce(&self, changes: impl IntoIterator<Item = OperationChange>) {
        for change in changes {
            // The task ends only with the last sender, so it cannot be gone here.
            let _ = self.queue.send(Queued::Change(change));
        }
    }

    /// Waits until every change queued so far has been sent (before the pool closes).
    pub(super) async fn flush(&self) {
        let (flushed, done) = oneshot::channel();
        if self.queue.send(Queued::Flush(flushed)).is_ok() {
            let _ = done.await;
        }
    }
}

async fn announce(queued: UnboundedReceiver<Queued>, pool: PgPool, channel: &'static str) {
    let notify = |payload: String| {
        let pool = pool.clone();
        async move {
            let sent = sqlx::query("select pg_notify($1, $2)")
                .bind(channel)
                .bind(payload)
                .execute(&pool)
                .await;
            if let (Err(error), false) = (sent, pool.is_closed()) {
                tracing::warn!(%error, "could not announce operation changes; live views miss them");
            }
        }
    };
    send_spaced(queued, notify).await;
}

/// Sends each notification's worth of queued changes with `notify`, `SPACING` apart unless
/// the one before was full, until every sender is gone.
async fn send_spaced<N, Sent>(mut queued: UnboundedReceiver<Queued>, mut notify: N)
where
    N: FnMut(String) -> Sent,
    Sent: Future<Output = ()>,
{
    let mut carried = None;
    let mut next_at = Instant::now();
    loop {
        if carried.is_none() {
            tokio::time::sleep_until(next_at).await;
        }
        let Some(batch) = next_batch(&mut queued, &mut carried).await else {
            return;
        };
        next_at = Instant::now() + SPACING;
        if let Some(payload) = batch.payload {
            notify(payload).await;
        }
        if let Some(flushed) = batch.flushed {
            let _ = flushed.send(());
        }
    }
}

/// One notification's worth of changes, and who waits for them to be sent.
struct Batch {
    /// A JSON array of changes; `None` when only a flush was waiting.
    payload: Option<String>,
    flushed: Option<oneshot::Sender<()>>,
}

/// The next notification: every queued change that fits, after waiting for the first, up to
/// a flush. A change that does not fit is `carried` to the next one.
async fn next_batch(
    queued: &mut UnboundedReceiver<Queued>,
    carried: &mut Option<String>,
) -> Option<Batch> {
    let mut payload = carried.take();
    loop {
        let next = if payload.is_none() {
            queued.recv().await?
        } else {
            match queued.try_recv() {
                Ok(next) => next,
                Err(_) => break,
            }
        };
        let change = match next {
            Queued::Change(change) => json(&change),
            Queued::Flush(flushed) => {
                let payload = payload.map(|changes| format!("[{changes}]"));
                return Some(Batch {
                    payload,
                    flushed: Some(flushed),
                });
            }
        };
        match &mut payload {
            None => payload = Some(change),
            // The comma before it and the two brackets.
            Some(changes) if changes.len() + change.len() + 3 > MAX_PAYLOAD => {
                *carried = Some(change);
                break;
            }
            Some(changes) => {
                changes.push(',');
                changes.push_str(&change);
            }
        }
    }
    Some(Batch {
        payload: payload.map(|changes| format!("[{changes}]")),
        flushed: None,
    })
}

fn json(change: &OperationChange) -> String {
    serde_json::to_string(change).expect("an operation change serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::domain::{Namespace, OperationStatus};
    use chrono::Utc;
    use uuid::Uuid;

    fn change() -> OperationChange {
        OperationChange {
            id: Uuid::now_v7(),
            namespace: Namespace::try_from("shop".to_owned()).unwrap(),
            status: OperationStatus::Pending,
            at: Utc::now(),
        }
    }

    #[tokio::test]
    async fn queued_changes_go_out_as_arrays_below_the_payload_limit() {
        let (queue, mut queued) = unbounded_channel();
        let changes: Vec<OperationChange> = (0..200).map(|_| change()).collect();
        for change in &changes {
            queue.send(Queued::Change(change.clone())).unwrap();
        }
        let (flushed, done) = oneshot::channel();
        queue.send(Queued::Flush(flushed)).unwrap();
        drop(queue);
        let mut carried = None;
        let mut heard = Vec::new();
        let mut payloads = 0;
        let mut flushes = Vec::new();
        while let Some(batch) = next_batch(&mut queued, &mut carried).await {
            flushes.extend(batch.flushed);
            let Some(payload) = batch.payload else {
                continue;
            };
            assert!(payload.len() < 8000, "{} bytes", payload.len());
            let batch: Vec<OperationChange> = serde_json::from_str(&payload).unwrap();
            assert!(!batch.is_empty());
            heard.extend(batch);
            payloads += 1;
        }
        assert_eq!(heard, changes, "every change once, in order");
        assert!(payloads > 1 && payloads < 20, "{payloads} notifications");
        assert_eq!(flushes.len(), 1, "the flush comes with the last batch");
        flushes.pop().unwrap().send(()).unwrap();
        done.await.unwrap();
    }

    /// Sends through `send_spaced` what `feed` queues, on tokio's paused clock; answers when
    /// each notification went out (from the start) and how many changes it carried.
    async fn spaced_sends(feed: impl AsyncFnOnce(&UnboundedSender<Queued>)) -> Vec<(u128, usize)> {
        let (queue, queued) = unbounded_channel();
        let started = Instant::now();
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = sent.clone();
        let sender = tokio::spawn(send_spaced(queued, move |payload: String| {
            let heard: Vec<OperationChange> = serde_json::from_str(&payload).unwrap();
            let at = started.elapsed().as_millis();
            record.lock().unwrap().push((at, heard.len()));
            async {}
        }));
        feed(&queue).await;
        drop(queue);
        sender.await.unwrap();
        let sent = sent.lock().unwrap().clone();
        sent
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_after_a_quiet_spell_goes_at_once_and_the_next_waits_for_the_spacing() {
        let sent = spaced_sends(async |queue| {
            tokio::time::sleep(Duration::from_millis(100)).await;
            queue.send(Queued::Change(change())).unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
            for _ in 0..3 {
                queue.send(Queued::Change(change())).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        })
        .await;
        assert_eq!(sent, vec![(100, 1), (105, 3)]);
    }

    #[tokio::test(start_paused = true)]
    async fn full_notifications_go_back_to_back() {
        let sent = spaced_sends(async |queue| {
            for _ in 0..200 {
                queue.send(Queued::Change(change())).unwrap();
            }
        })
        .await;
        assert!(sent.len() > 2, "{sent:?}");
        assert!(sent.iter().all(|&(at, _)| at == 0), "{sent:?}");
        assert_eq!(sent.iter().map(|&(_, n)| n).sum::<usize>(), 200);
    }

    #[tokio::test]
    async fn a_flush_with_nothing_queued_is_answered_alone() {
        let (queue, mut queued) = unbounded_channel();
        let (flushed, _done) = oneshot::channel();
        queue.send(Queued::Flush(flushed)).unwrap();
        let batch = next_batch(&mut queued, &mut None).await.unwrap();
        assert!(batch.payload.is_none() && batch.flushed.is_some());
    }
}
