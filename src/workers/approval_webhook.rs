//! The approval webhook: every request for approval this process creates is POSTed as JSON
//! to `IDEM_APPROVAL_WEBHOOK_URL`, retried with backoff, and never holds up the claim that
//! created it: the ledger only queues it ([`WebhookQueue`]); this worker sends.
//!
//! The body is `{"event": "approval_requested", "operation": Op, "url": <the operation's page
//! under IDEM_PUBLIC_URL, or null>}`, with `Idempotency-Key: approval_requested:<id>` so a
//! receiver can drop the repeat of a delivery whose answer got lost. Any 2xx answer is
//! success; anything else, or no answer within ten seconds, is tried again after each of the
//! configured pauses (1 s, 5 s, 30 s, 2 min by default), then given up with a warning.

use app::ledger::{ApprovalNotifier, Operation};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{stopped, StopSignal};

/// How many requests may wait to be sent before new ones are dropped (with a warning): a
/// webhook that is down must not make the server hold unbounded memory.
const QUEUE_CAPACITY: usize = 1024;
/// How long one delivery may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// At shutdown, how long first deliveries still queued may take in all.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Where and how deliveries go. The URL is never logged: webhook URLs often carry a secret.
#[derive(Clone)]
struct Target {
    client: reqwest::Client,
    url: reqwest::Url,
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
    retry_delays: Arc<[Duration]>,
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
            client,
            url,
            public_url: public_url.map(|url| url.trim_end_matches('/').to_owned()),
        };
        let worker = Self {
            target,
            retry_delays: retry_delays.into(),
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
                    if !self.target.deliver(operation.id, &body, 1).await {
                        let (target, delays) = (self.target.clone(), self.retry_delays.clone());
                        retries.spawn(target.retry(operation.id, body, delays));
                    }
                }
            }
        }
        queue.close();
        let drain = async {
            while let Some(operation) = queue.recv().await {
                let body = self.target.body(&operation);
                self.target.deliver(operation.id, &body, 1).await;
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
        let url = self
            .public_url
            .as_ref()
            .map(|base| format!("{base}/operations/{}", operation.id));
        json!({ "event": "approval_requested", "operation": operation, "url": url })
    }

    /// One delivery; `true` when the receiver answered 2xx.
    async fn deliver(&self, id: Uuid, body: &Value, attempt: usize) -> bool {
        let sent = self
            .client
            .post(self.url.clone())
            .header("idempotency-key", format!("approval_requested:{id}"))
            .timeout(ATTEMPT_TIMEOUT)
            .json(body)
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => {
                tracing::info!(operation = %id, attempt, "approval request announced to the webhook");
                true
            }
            Ok(answer) => {
                let status = answer.status().as_u16();
                tracing::info!(operation = %id, attempt, status, "the approval webhook refused a delivery");
                false
            }
            Err(error) => {
                // reqwest's message names the URL, which may carry credentials.
                let error = error.without_url();
                tracing::info!(operation = %id, attempt, %error, "the approval webhook could not be reached");
                false
            }
        }
    }

    /// The retries after a failed first delivery, each after its pause.
    async fn retry(self, id: Uuid, body: Value, delays: Arc<[Duration]>) {
        for (n, delay) in delays.iter().enumerate() {
            tokio::time::sleep(*delay).await;
            if self.deliver(id, &body, n + 2).await {
                return;
            }
        }
        tracing::warn!(
            operation = %id,
            attempts = delays.len() + 1,
            "gave up announcing a request for approval to the webhook"
        );
    }
}
