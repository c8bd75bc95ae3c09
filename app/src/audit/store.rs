//! The storage port of the audit log. Implemented once per database in the server crate and
//! checked by one conformance suite. It can append and read, nothing else: the tables refuse
//! updates and deletes as well.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::store_error::StoreError;

/// One entry of the audit log, as stored and as `GET /v1/audit` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AuditEvent {
    /// UUIDv7: events order by it, newest last.
    pub id: Uuid,
    pub at: DateTime<Utc>,
    /// `user:<username>`, `anonymous` (a failed sign-in), `cli` or `system`.
    pub actor: String,
    /// The client's IP address as the server saw it; none for the command line.
    pub address: Option<String>,
    /// What was done, `<thing>.<what happened>`: `login.succeeded`, `api_key.created`, …
    pub action: String,
    /// What it was done to: `user:<name>`, `api_key:<id>`, `operation:<id>`, `tool:<name>`.
    pub subject: String,
    /// Further facts, never a secret (redacted before it is stored).
    #[schema(value_type = Object)]
    pub detail: Value,
}

/// The append-only audit log.
#[async_trait::async_trait]
pub trait AuditStore: Send + Sync {
    /// Appends one event.
    async fn append(&self, event: &AuditEvent) -> Result<(), StoreError>;

    /// Up to `limit` events, newest first; only those older than the event `before`, if given
    /// (keyset pagination).
    async fn newest(&self, before: Option<Uuid>, limit: u32)
        -> Result<Vec<AuditEvent>, StoreError>;
}
