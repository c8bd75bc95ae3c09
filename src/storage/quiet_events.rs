//! Events that change no state — replays and refused duplicates — written behind the answer.
//!
//! A replay is the common case idem exists for, and it changes nothing: its answer comes from
//! a committed operation. Making each replay wait for a durable commit of its own audit event
//! would cost a synchronous write per replay, which is what bounded replays to the writer's
//! commit rate. So these events are queued in memory and written by one task in multi-row
//! batches: what arrives within `GATHER_FOR` of the first goes into one transaction (sooner
//! when a batch fills or a reader asks for a flush).
//!
//! The price, stated in the README: a crash can lose the replay events of its last moments
//! (never a state change, whose events commit with it); and another process may see them a
//! moment late (the gathering time and one write). This process reads its own: every read of
//! events or metrics flushes first.

use app::ledger::Event;
use app::store_error::StoreError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// At most this many events per write; larger backlogs take several.
const MAX_BATCH: usize = 1000;
/// Events held in memory while the database refuses them; beyond this, new ones are dropped
/// (and logged) rather than exhaust memory.
const MAX_BACKLOG: usize = 100_000;
/// How long a failed write waits before it is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How long events gather before they are written, unless someone waits for them or a batch
/// fills. Each write is a commit that rewrites every index page its rows touch; replays of a
/// few hot keys touch the same pages again and again, so ten times the rows per commit cost
/// far less than ten times the pages.
const GATHER_FOR: Duration = Duration::from_millis(10);

/// Where the events go: one transaction per call.
#[async_trait::async_trait]
pub(crate) trait EventSink: Send + Sync + 'static {
    async fn write_events(&self, events: &[Event]) -> Result<(), StoreError>;
}

enum Message {
    Events(Vec<Event>),
    /// Answered once every event queued before it is written (or failed to be).
    Flush(oneshot::Sender<()>),
}

/// The queue of quiet events. Cheap to clone.
#[derive(Clone)]
pub(crate) struct QuietEvents {
    queue: mpsc::UnboundedSender<Message>,
}

impl QuietEvents {
    /// Starts the writing task; it ends when the last handle is dropped, after writing
    /// what is queued.
    pub(crate) fn start(sink: Arc<dyn EventSink>) -> Self {
        let (queue, messages) = mpsc::unbounded_channel();
        tokio::spawn(run(sink, messages));
        Self { queue }
    }

    /// Queues events; returns at once.
    pub(crate) fn record(&self, events: Vec<Event>) {
        if !events.is_empty() && self.queue.send(Message::Events(events)).is_err() {
            tracing::warn!("quiet events after the writer stopped were dropped");
        }
    }

    /// Waits until every event recorded before this call is written, or its write failed.
    pub(crate) async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }
}

async fn run(sink: Arc<dyn EventSink>, mut messages: mpsc::UnboundedReceiver<Message>) {
    let mut backlog: Vec<Event> = Vec::new();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    loop {
        // A backlog left by a failed write is retried after a pause even if nothing new comes.
        let next = if backlog.is_empty() {
            messages.recv().await
        } else {
            match tokio::time::timeout(RETRY_PAUSE, messages.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    write_backlog(sink.as_ref(), &mut backlog).await;
                    continue;
                }
            }
        };
        let Some(message) = next else { break };
        take(message, &mut backlog, &mut waiting);
        gather(&mut messages, &mut backlog, &mut waiting).await;
        write_backlog(sink.as_ref(), &mut backlog).await;
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
    write_backlog(sink.as_ref(), &mut backlog).await;
}

/// Takes what comes for [`GATHER_FOR`], until a batch is full, or at once when someone waits.
async fn gather(
    messages: &mut mpsc::UnboundedReceiver<Message>,
    backlog: &mut Vec<Event>,
    waiting: &mut Vec<oneshot::Sender<()>>,
) {
    let deadline = tokio::time::sleep(GATHER_FOR);
    tokio::pin!(deadline);
    while backlog.len() < MAX_BATCH && waiting.is_empty() {
        tokio::select! {
            biased;
            message = messages.recv() => match message {
                Some(message) => take(message, backlog, waiting),
                None => return,
            },
            () = &mut deadline => break,
        }
    }
    // Everything already queued goes in the same write.
    while let Ok(message) = messages.try_recv() {
        take(message, backlog, waiting);
    }
}

fn take(message: Message, backlog: &mut Vec<Event>, waiting: &mut Vec<oneshot::Sender<()>>) {
    match message {
        Message::Events(events) if backlog.len() + events.len() > MAX_BACKLOG => {
            tracing::error!(
                dropped = events.len(),
                "the database has refused quiet events for a while; dropping new ones"
            );
        }
        Message::Events(events) => backlog.extend(events),
        Message::Flush(done) => waiting.push(done),
    }
}

/// Writes the backlog in batches; on a failure keeps what is left for the next round.
async fn write_backlog(sink: &dyn EventSink, backlog: &mut Vec<Event>) {
    while !backlog.is_empty() {
        let size = backlog.len().min(MAX_BATCH);
        match sink.write_events(&backlog[..size]).await {
            Ok(()) => {
                backlog.drain(..size);
            }
            Err(error) => {
                tracing::warn!(%error, kept = backlog.len(), "could not write quiet events; will retry");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::ledger::EventKind;
    use chrono::Utc;
    use std::sync::Mutex;
    use uuid::Uuid;

    /// Remembers the size of each write it was given.
    #[derive(Default)]
    struct CountingSink(Mutex<Vec<usize>>);

    #[async_trait::async_trait]
    impl EventSink for CountingSink {
        async fn write_events(&self, events: &[Event]) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(events.len());
            Ok(())
        }
    }

    impl CountingSink {
        fn writes(&self) -> Vec<usize> {
            self.0.lock().unwrap().clone()
        }
    }

    fn replays(count: usize) -> Vec<Event> {
        let event = Event {
            operation_id: Uuid::now_v7(),
            at: Utc::now(),
            kind: EventKind::Replayed,
            actor: "agent:bench/key".into(),
            detail: serde_json::json!({}),
        };
        vec![event; count]
    }

    fn started() -> (Arc<CountingSink>, QuietEvents) {
        let sink = Arc::new(CountingSink::default());
        let events = QuietEvents::start(sink.clone());
        (sink, events)
    }

    #[tokio::test(start_paused = true)]
    async fn events_recorded_apart_within_the_gathering_time_go_in_one_write() {
        let (sink, events) = started();
        events.record(replays(1));
        // The writer has taken the first event and is gathering.
        tokio::time::sleep(Duration::from_millis(1)).await;
        events.record(replays(2));
        tokio::time::sleep(GATHER_FOR * 5).await;
        assert_eq!(sink.writes(), vec![3]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_writes_what_is_gathering_without_waiting_out_the_gathering_time() {
        let (sink, events) = started();
        events.record(replays(2));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let asked = tokio::time::Instant::now();
        events.flush().await;
        // The clock is paused: it moves only when everything waits for a timer.
        assert_eq!(
            asked.elapsed(),
            Duration::ZERO,
            "the flush waited for a timer"
        );
        assert_eq!(sink.writes(), vec![2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_written_without_waiting_out_the_gathering_time() {
        let (sink, events) = started();
        events.record(replays(MAX_BATCH + 1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(sink.writes(), vec![MAX_BATCH, 1]);
    }
}
