//! The provider port: how the ledger calls a tool's executor and asks it, later, whether a
//! call with a key took effect. `src/provider.rs` implements it over HTTP; the ledger only
//! sees the outcome classes below.

use serde_json::Value;

use crate::domain::ExecutorConfig;

/// What one call of a tool's executor came to, already classified (docs/providers.md,
/// "Outcome classes").
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    /// The provider did it: `result` is its answer.
    Succeeded {
        result: Value,
        provider_ref: Option<String>,
    },
    /// The provider did not do it. `retryable` when it never saw the call (connection
    /// refused) or asked us to come back later; a permanent refusal is replayed as it is.
    Failed { error: Value, retryable: bool },
    /// Nobody can tell whether the provider did it (timeout, reset after sending, 5xx):
    /// reconciliation decides.
    Unknown { error: Value },
}

/// What the provider says about a provider key when asked (`GET reconcile_url?key=…`).
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The provider saw the key and did it.
    Found {
        result: Value,
        provider_ref: Option<String>,
    },
    /// The provider never saw the key: the call did not take effect.
    NotFound,
}

/// The provider could not answer a lookup (down, timed out, or answered nonsense); ask again
/// later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// Calls tools on the ledger's behalf.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Calls `executor.url` with `args` as the JSON body and the operation's `provider_key` as
    /// `Idempotency-Key`, within `executor.timeout_ms`, and classifies what came back.
    async fn execute(
        &self,
        executor: &ExecutorConfig,
        provider_key: &str,
        args: &Value,
    ) -> Execution;

    /// Asks `executor.reconcile_url` whether the provider saw `provider_key`. An executor
    /// without a `reconcile_url` cannot be asked: that is a `LookupError`.
    async fn lookup(
        &self,
        executor: &ExecutorConfig,
        provider_key: &str,
    ) -> Result<Lookup, LookupError>;
}
