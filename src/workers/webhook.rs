//! One outbound webhook: JSON POSTs to a configured URL, each with an `Idempotency-Key` so a
//! receiver can drop the repeat of a delivery whose answer got lost. Any 2xx answer is
//! success; anything else, or no answer within ten seconds, is tried again after each of the
//! configured pauses, then given up with a warning. The URL is never logged: webhook URLs
//! often carry a secret.

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long one delivery may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where deliveries go, how, and the pauses before each retry. Cheap to clone.
#[derive(Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: reqwest::Url,
    retry_delays: Arc<[Duration]>,
    /// What the deliveries announce, for the log (`approval webhook`, `alert webhook`).
    what: &'static str,
}

impl Webhook {
    pub fn new(
        client: reqwest::Client,
        url: reqwest::Url,
        retry_delays: Vec<Duration>,
        what: &'static str,
    ) -> Self {
        Self {
            client,
            url,
            retry_delays: retry_delays.into(),
            what,
        }
    }

    /// One delivery; `true` when the receiver answered 2xx.
    pub async fn deliver(&self, key: &str, body: &Value, attempt: usize) -> bool {
        let sent = self
            .client
            .post(self.url.clone())
            .header("idempotency-key", key)
            .timeout(ATTEMPT_TIMEOUT)
            .json(body)
            .send()
            .await;
        let what = self.what;
        match sent {
            Ok(answer) if answer.status().is_success() => {
                tracing::info!(key, attempt, "delivered to the {what}");
                true
            }
            Ok(answer) => {
                let status = answer.status().as_u16();
                tracing::info!(key, attempt, status, "the {what} refused a delivery");
                false
            }
            Err(error) => {
                // reqwest's message names the URL, which may carry credentials.
                let error = error.without_url();
                tracing::info!(key, attempt, %error, "the {what} could not be reached");
                false
            }
        }
    }

    /// The retries after a failed first delivery, each after its pause.
    pub async fn retry(self, key: String, body: Value) {
        for (n, delay) in self.retry_delays.iter().enumerate() {
            tokio::time::sleep(*delay).await;
            if self.deliver(&key, &body, n + 2).await {
                return;
            }
        }
        let attempts = self.retry_delays.len() + 1;
        tracing::warn!(key, attempts, "gave up a delivery to the {}", self.what);
    }
}
