//! [`HttpProvider`]: the ledger's `Provider` port over HTTP. It calls tool executors and
//! asks their `reconcile_url`, with one shared `reqwest::Client` (connection reuse, no
//! blocking). What came back is decided by the pure [`classify`]; this file only turns the
//! wire into an [`Attempt`].

mod classify;
mod lookup;

pub use classify::{classify, Attempt};
pub use lookup::{lookup_url, parse_lookup};

use app::domain::ExecutorConfig;
use app::ledger::{Execution, Lookup, LookupError, Provider};
use reqwest::{redirect, Client, Response};
use serde_json::Value;
use std::error::Error as _;
use std::time::Duration;

/// The most of a provider's answer that is read (1 MiB); a longer one is not stored.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// Calls tools over HTTP on the ledger's behalf. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct HttpProvider {
    client: Client,
    body_limit: usize,
}

impl HttpProvider {
    /// A provider client reading at most [`BODY_LIMIT`] of each answer.
    pub fn new() -> Result<Self, reqwest::Error> {
        let client = Client::builder()
            // A redirected POST would be re-sent as a GET somewhere else: the 3xx itself is
            // the answer (and classified as unknown).
            .redirect(redirect::Policy::none())
            .user_agent(concat!("idem/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            body_limit: BODY_LIMIT,
        })
    }

    /// The same client with another bound on the answers it reads.
    pub fn with_body_limit(self, body_limit: usize) -> Self {
        Self { body_limit, ..self }
    }

    /// Sends the call and reads the answer, within `timeout_ms` for the whole of it.
    pub async fn attempt(
        &self,
        executor: &ExecutorConfig,
        provider_key: &str,
        args: &Value,
    ) -> Attempt {
        let call = async {
            let sent = self
                .client
                .post(&executor.url)
                .header("idempotency-key", provider_key)
                .json(args)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(error) if error.is_connect() || error.is_builder() => {
                    return Attempt::NotSent {
                        reason: describe(error),
                    }
                }
                Err(error) => {
                    return Attempt::Lost {
                        status: None,
                        reason: describe(error),
                    }
                }
            };
            let status = response.status().as_u16();
            let provider_ref = response
                .headers()
                .get("x-provider-ref")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            match read_bounded(response, self.body_limit).await {
                Ok(body) => Attempt::Answered {
                    status,
                    provider_ref,
                    body,
                },
                Err(BodyError::TooLarge) => Attempt::TooLarge {
                    status,
                    limit: self.body_limit,
                },
                Err(BodyError::Read(error)) => Attempt::Lost {
                    status: Some(status),
                    reason: describe(error),
                },
            }
        };
        tokio::time::timeout(timeout_of(executor), call)
            .await
            .unwrap_or(Attempt::TimedOut {
                timeout_ms: executor.timeout_ms,
            })
    }
}

#[async_trait::async_trait]
impl Provider for HttpProvider {
    #[tracing::instrument(skip_all, fields(provider_key = %provider_key))]
    async fn execute(
        &self,
        executor: &ExecutorConfig,
        provider_key: &str,
        args: &Value,
    ) -> Execution {
        let execution = classify(&self.attempt(executor, provider_key, args).await);
        match &execution {
            Execution::Succeeded { provider_ref, .. } => {
                tracing::info!(?provider_ref, "the executor succeeded");
            }
            Execution::Failed { error, retryable } => {
                tracing::warn!(%error, retryable, "the executor failed");
            }
            Execution::Unknown { error } => {
                tracing::warn!(%error, "the executor's outcome is unknown");
            }
        }
        execution
    }

    #[tracing::instrument(skip_all, fields(provider_key = %provider_key))]
    async fn lookup(
        &self,
        executor: &ExecutorConfig,
        provider_key: &str,
    ) -> Result<Lookup, LookupError> {
        let url = lookup_url(executor.reconcile_url.as_deref(), provider_key)?;
        let call =
            async {
                let response = self.client.get(url).send().await.map_err(|error| {
                    LookupError(format!("the lookup failed: {}", describe(error)))
                })?;
                let status = response.status().as_u16();
                let body = read_bounded(response, self.body_limit)
                    .await
                    .map_err(|error| match error {
                        BodyError::TooLarge => LookupError(format!(
                            "the lookup answer is larger than {} bytes",
                            self.body_limit
                        )),
                        BodyError::Read(error) => {
                            LookupError(format!("the lookup answer broke off: {}", describe(error)))
                        }
                    })?;
                parse_lookup(status, &body)
            };
        tokio::time::timeout(timeout_of(executor), call)
            .await
            .unwrap_or_else(|_| {
                Err(LookupError(format!(
                    "the provider did not answer the lookup within {} ms",
                    executor.timeout_ms
                )))
            })
    }
}

fn timeout_of(executor: &ExecutorConfig) -> Duration {
    Duration::from_millis(executor.timeout_ms.into())
}

enum BodyError {
    TooLarge,
    Read(reqwest::Error),
}

/// The body, read chunk by chunk so that a huge answer is refused, not buffered.
async fn read_bounded(mut response: Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    if response
        .content_length()
        .is_some_and(|length| length > limit_u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error and its causes on one line, without the URL (it may carry credentials).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
