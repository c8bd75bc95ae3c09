//! What is written behind the answer: events that change no state (replays and refused
//! duplicates) and the table by tool's counts.
//!
//! A replay is the common case idem exists for, and it changes nothing: its answer comes from
//! a committed operation. Making each replay wait for a durable commit of its own audit event
//! would cost a synchronous write per replay, which is what bounded replays to the writer's
//! commit rate. So these events are queued in memory and written by one task in multi-row
//! batches: what arrives within `GATHER_FOR` of the first goes into one transaction (sooner
//! when a batch fills or a reader asks for a flush).
//!
//! The table by tool (`GET /v1/metrics/tools`) is counted the same way: every decision's
//! ticks are added up here and written, added to the rows of their minute and hour, at most
//! `TALLY_FOR` later (with the next events, or when a reader asks). Counting them back from
//! the events would read every claim and completion again.
//!
//! The price, stated in the README: a crash can lose the replay events and the counts of its
//! last moments (never a state change, whose events commit with it); and another process may
//! see them a moment late (the gathering time and one write). This process reads its own:
//! every read of events or metrics flushes first.

use app::ledger::metrics::ToolTick;
use app::ledger::Event;
use app::store_error::StoreError;
use std::collections::BTreeMap;
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
/// How long counts gather when no event waits with them: a claim of a new key ticks, and
/// under load a write every `GATHER_FOR` would be a commit of its own on PostgreSQL.
const TALLY_FOR: Duration = Duration::from_secs(1);

/// Counts by tick, in the order they are written (every writer locks rows in one order).
pub(crate) type Tally = BTreeMap<ToolTick, i64>;

/// Where the events and counts go: one transaction per call.
#[async_trait::async_trait]
pub(crate) trait BehindSink: Send + Sync + 'static {
    async fn write(&self, events: &[Event], tally: &Tally) -> Result<(), StoreError>;
}

enum Message {
    Events(Vec<Event>),
    Ticks(Vec<ToolTick>),
    /// Answered once every event queued before it is written (or failed to be).
    Flush(oneshot::Sender<()>),
}

/// The queue of what is written behind. Cheap to clone.
#[derive(Clone)]
pub(crate) struct WrittenBehind {
    queue: mpsc::UnboundedSender<Message>,
}

impl WrittenBehind {
    /// Starts the writing task; it ends when the last handle is dropped, after writing
    /// what is queued.
    pub(crate) fn start(sink: Arc<dyn BehindSink>) -> Self {
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

    /// Queues ticks of the table by tool; returns at once.
    pub(crate) fn count(&self, ticks: Vec<ToolTick>) {
        if !ticks.is_empty() && self.queue.send(Message::Ticks(ticks)).is_err() {
            tracing::warn!("counts after the writer stopped were dropped");
        }
    }

    /// Waits until everything queued before this call is written, or its write failed.
    pub(crate) async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }
}

/// What waits to be written.
#[derive(Default)]
struct Backlog {
    events: Vec<Event>,
    tally: Tally,
}

impl Backlog {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.tally.is_empty()
    }

    /// How long to gather before writing: events are written soon, counts alone can wait.
    fn gather_for(&self) -> Duration {
        if self.events.is_empty() {
            TALLY_FOR
        } else {
            GATHER_FOR
        }
    }
}

async fn run(sink: Arc<dyn BehindSink>, mut messages: mpsc::UnboundedReceiver<Message>) {
    let mut backlog = Backlog::default();
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

/// Takes what comes for [`GATHER_FOR`] ([`TALLY_FOR`] while only counts came), until a
/// batch is full, or at once when someone waits.
async fn gather(
    messages: &mut mpsc::UnboundedReceiver<Message>,
    backlog: &mut Backlog,
    waiting: &mut Vec<oneshot::Sender<()>>,
) {
    let started = tokio::time::Instant::now();
    while backlog.events.len() < MAX_BATCH && waiting.is_empty() {
        let deadline = tokio::time::sleep_until(started + backlog.gather_for());
        tokio::select! {
            biased;
            message = messages.recv() => match message {
                Some(message) => take(message, backlog, waiting),
                None => return,
            },
            () = deadline => break,
        }
    }
    // Everything already queued goes in the same write.
    while let Ok(message) = messages.try_recv() {
        take(message, backlog, waiting);
    }
}

fn take(message: Message, backlog: &mut Backlog, waiting: &mut Vec<oneshot::Sender<()>>) {
    match message {
        Message::Events(events) if backlog.events.len() + events.len() > MAX_BACKLOG => {
            tracing::error!(
                dropped = events.len(),
                "the database has refused quiet events for a while; dropping new ones"
            );
        }
        Message::Events(events) => backlog.events.extend(events),
        Message::Ticks(ticks) => {
            for tick in ticks {
                *backlog.tally.entry(tick).or_default() += 1;
            }
        }
        Message::Flush(done) => waiting.push(done),
    }
}

/// Writes the backlog in batches, the counts with the first; on a failure keeps what is left
/// for the next round.
async fn write_backlog(sink: &dyn BehindSink, backlog: &mut Backlog) {
    while !backlog.is_empty() {
        let size = backlog.events.len().min(MAX_BATCH);
        match sink.write(&backlog.events[..size], &backlog.tally).await {
            Ok(()) => {
                backlog.events.drain(..size);
                backlog.tally.clear();
            }
            Err(error) => {
                tracing::warn!(%error, kept = backlog.events.len(), "could not write quiet events and counts; will retry");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::ledger::metrics::ToolMeasure;
    use app::ledger::EventKind;
    use chrono::Utc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use uuid::Uuid;

    /// Remembers what each write was given: how many events, and the counts; refuses the
    /// first `refusals` writes.
    #[derive(Default)]
    struct CountingSink {
        writes: Mutex<Vec<(usize, Tally)>>,
        refusals: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl BehindSink for CountingSink {
        async fn write(&self, events: &[Event], tally: &Tally) -> Result<(), StoreError> {
            let refuse = self
                .refusals
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if refuse.is_ok() {
                return Err(StoreError::Unavailable("refused for the test".into()));
            }
            self.writes
                .lock()
                .unwrap()
                .push((events.len(), tally.clone()));
            Ok(())
        }
    }

    impl CountingSink {
        fn writes(&self) -> Vec<usize> {
            self.writes.lock().unwrap().iter().map(|w| w.0).collect()
        }

        fn tallies(&self) -> Vec<Tally> {
            self.writes
                .lock()
                .unwrap()
                .iter()
                .map(|w| w.1.clone())
                .collect()
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

    fn tick(tool: &str) -> ToolTick {
        ToolTick {
            minute: 29_000_000,
            namespace: "billing".into(),
            tool: tool.into(),
            measure: ToolMeasure::Operations,
        }
    }

    fn tally(counts: &[(&str, i64)]) -> Tally {
        counts.iter().map(|(tool, n)| (tick(tool), *n)).collect()
    }

    fn started() -> (Arc<CountingSink>, WrittenBehind) {
        started_with(CountingSink::default())
    }

    fn started_with(sink: CountingSink) -> (Arc<CountingSink>, WrittenBehind) {
        let sink = Arc::new(sink);
        let events = WrittenBehind::start(sink.clone());
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
        events.count(vec![tick("refund")]);
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
        assert_eq!(sink.tallies(), vec![tally(&[("refund", 1)])]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_written_without_waiting_out_the_gathering_time() {
        let (sink, events) = started();
        events.record(replays(MAX_BATCH + 1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(sink.writes(), vec![MAX_BATCH, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn counts_alone_gather_longer_and_add_up_per_tick() {
        let (sink, events) = started();
        events.count(vec![tick("refund"), tick("email")]);
        tokio::time::sleep(GATHER_FOR * 5).await;
        events.count(vec![tick("refund")]);
        assert!(sink.writes().is_empty(), "counts alone wait for more");
        tokio::time::sleep(TALLY_FOR).await;
        assert_eq!(sink.tallies(), vec![tally(&[("email", 1), ("refund", 2)])]);

        // Counts that come with events go with them, as soon.
        events.count(vec![tick("refund")]);
        events.record(replays(1));
        tokio::time::sleep(GATHER_FOR * 2).await;
        assert_eq!(sink.writes(), vec![0, 1]);
        assert_eq!(sink.tallies()[1], tally(&[("refund", 1)]));
    }

    #[tokio::test(start_paused = true)]
    async fn counts_a_refused_write_held_are_added_to_the_next() {
        let (sink, events) = started_with(CountingSink {
            refusals: AtomicUsize::new(1),
            ..CountingSink::default()
        });
        events.count(vec![tick("refund")]);
        tokio::time::sleep(TALLY_FOR + GATHER_FOR).await;
        assert!(sink.writes().is_empty(), "the first write was refused");
        events.count(vec![tick("refund")]);
        events.flush().await;
        assert_eq!(sink.tallies(), vec![tally(&[("refund", 2)])]);
    }
}
