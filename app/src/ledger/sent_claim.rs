//! A claim as the agent sent it: what the HTTP adapter hands the ledger.

use serde_json::Value;

use super::model::Runner;

/// A claim as the agent sent it, before any checks.
#[derive(Debug, Clone, Default)]
pub struct SentClaim {
    pub tool: String,
    pub args: Value,
    /// The `Idempotency-Key` header.
    pub header_key: Option<String>,
    pub body_key: Option<String>,
    pub business_key: Option<String>,
    pub run_id: Option<String>,
    pub step: Option<u64>,
    /// Who will execute the tool: the caller, or idem (`invoke`).
    pub runner: Runner,
}
