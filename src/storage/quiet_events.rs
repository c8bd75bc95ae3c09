//! Events that change no state — replays and refused duplicates — written behind the answer.
//!
//! A replay is the common case idem exists for, and it changes nothing: its answer comes from
//! a committed operation. Making each replay wait for a durable commit of its own audit event
//! would cost a synchronous write per replay, which is what bounded replays to the writer's
//! commit rate. So these events are queued in memory and written by one task in multi-row
//! batches: as fast as they come, and as many per transaction as queued up meanwhile.
//!
//! The price, stated in the README: a crash can lose the replay events of its last moments
//! (never a state change, whose events commit with it); and another process may see them a
//! moment late. This process reads its own: every read of events or metrics flushes first.

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
        // Everything that queued up meanwhile goes in the same write.
        while let Ok(message) = messages.try_recv() {
            take(message, &mut backlog, &mut waiting);
        }
        write_backlog(sink.as_ref(), &mut backlog).await;
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
    write_backlog(sink.as_ref(), &mut backlog).await;
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
