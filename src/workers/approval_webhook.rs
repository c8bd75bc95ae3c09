//! The approval webhook: every request for approval this process creates is POSTed as JSON
//! to `IDEM_APPROVAL_WEBHOOK_URL`, retried with backoff, and never holds up the claim that
//! created it: the ledger only queues it ([`WebhookQueue`]); this worker sends.
//!
//! The body is `{"event": "approval_requested", "operation": Op, "url": <the operation's page
//! under IDEM_PUBLIC_URL, or null>}`, with `Idempotency-Key: approval_requested:<id>`;
//! delivered as [`Webhook`] says, retried after 1 s, 5 s, 30 s and 2 min by default.

use app::ledger::{ApprovalNotifier, Operation};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::webhook::Webhook;
use super::{stopped, StopSignal};

/// How many requests may wait to be sent before new ones are dropped (with a warning): a
/// webhook that is down must not make the server hold unbounded memory.
const QUEUE_CAPACITY: usize = 1024;
/// At shutdown, how long first deliveries still queued may take in all.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Where deliveries go, and the public URL their links start with.
#[derive(Clone)]
struct Target {
    webhook: Webhook,
    /// `IDEM_PUBLIC_URL` without its trailing `/`.
    public_url: Option<String>,
}

/// The ledger's end: queues each new request for approval, without waiting.
pub struct WebhookQueue(mpsc::Sender<Operation>);

impl ApprovalNotifier for WebhookQueue {
    fn approval_requested(&self, operation: &Operation) {
        if self.0.try_send(operation.clone()).is_err() {
            tracing::warn!(
                operation = %operation.id,
                "the approval webhook queue is full (or stopped); this request is not announced"
            );
        }
    }
}

/// The worker's end: sends what was queued, first deliveries in order of creation, retries
/// each on its own schedule.
#[derive(Clone)]
pub struct ApprovalWebhook {
    target: Target,
    /// Shared so that a worker restarted after a panic takes up the same queue.
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Operation>>>,
}

impl ApprovalWebhook {
    /// The worker and the queue to hand to the ledger. `retry_delays` are the pauses before
    /// each retry; after the last one it gives up.
    pub fn new(
        client: reqwest::Client,
        url: reqwest::Url,
        public_url: Option<&str>,
        retry_delays: Vec<Duration>,
    ) -> (Arc<WebhookQueue>, Self) {
        let (sender, queue) = mpsc::channel(QUEUE_CAPACITY);
        let target = Target {
            webhook: Webhook::new(client, url, retry_delays, "approval webhook"),
            public_url: public_url.map(|url| url.trim_end_matches('/').to_owned()),
        };
        let worker = Self {
            target,
            queue: Arc::new(tokio::sync::Mutex::new(queue)),
        };
        (Arc::new(WebhookQueue(sender)), worker)
    }

    /// Sends until the stop signal fires; then makes one last attempt at what is still
    /// queued (for a few seconds at most) and abandons pending retries, saying so.
    pub async fn run(self, stop: StopSignal) {
        let mut queue = self.queue.lock().await;
        let stop = stopped(stop);
        tokio::pin!(stop);
        let mut retries = JoinSet::new();
        loop {
            tokio::select! {
                () = &mut stop => break,
                Some(_) = retries.join_next(), if !retries.is_empty() => {}
                next = queue.recv() => {
                    let Some(operation) = next else { break };
                    let body = self.target.body(&operation);
                    // The first delivery is made here, one after the other, so the receiver
                    // hears of requests in the order they were made.
                    let key = delivery_key(&operation);
                    if !self.target.webhook.deliver(&key, &body, 1).await {
                        retries.spawn(self.target.webhook.clone().retry(key, body));
                    }
                }
            }
        }
        queue.close();
        let drain = async {
            while let Some(operation) = queue.recv().await {
                let body = self.target.body(&operation);
                self.target
                    .webhook
                    .deliver(&delivery_key(&operation), &body, 1)
                    .await;
            }
        };
        let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
        if !retries.is_empty() {
            tracing::warn!(
                pending = retries.len(),
                "stopping: approval webhook deliveries still waiting for a retry are abandoned"
            );
        }
    }
}

impl Target {
    fn body(&self, operation: &Operation) -> Value {
        let page = |path: &str| {
            self.public_url
                .as_ref()
                .map(|base| format!("{base}/{path}/{}", operation.id))
        };
        json!({
            "event": "approval_requested",
            "operation": operation,
            "url": page("operations"),
            "approval_url": page("approvals"),
        })
    }
}

/// What a receiver may drop the repeat of: one announcement per operation.
fn delivery_key(operation: &Operation) -> String {
    format!("approval_requested:{}", operation.id)
}
