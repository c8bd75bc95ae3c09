//! The storage port of the ledger. Each backend runs the pure rules (`decide_claim`,
//! `decide_report`) inside a transaction that holds the key or the operation, and commits
//! the decision's writes and state-changing events together.

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::claim::{Claim, Fresh};
use super::complete::{Report, ReportRefused};
use super::model::{ClaimRequest, Event, Operation};
use super::settle::{SettleRefused, Settlement};
use super::verdict::{Verdict, VerdictRefused};
use super::write::Decision;
use crate::domain::{Namespace, OperationStatus, ToolName, ToolPolicy};
use crate::store_error::StoreError;

/// Operations, events and tools.
#[async_trait::async_trait]
pub trait LedgerStore: Send + Sync {
    /// Claims the request's key atomically: reads the live operation of `(namespace, key)`,
    /// decides with `decide_claim` at the store's current time, and commits the writes and
    /// the state-changing events in the same transaction.
    async fn claim(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: Fresh,
    ) -> Result<Decision<Claim>, StoreError>;

    /// Applies a lease holder's report with `decide_report`, atomically. `None` when the
    /// namespace has no such operation.
    async fn report(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: &Report,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError>;

    /// Applies a person's verdict with `decide_verdict`, atomically. `None` when there is no
    /// such operation.
    async fn decide(
        &self,
        id: Uuid,
        verdict: &Verdict,
        username: &str,
    ) -> Result<Option<Decision<Result<Operation, VerdictRefused>>>, StoreError>;

    /// Applies a settlement (reconciliation, a late executor answer, a person's resolve or
    /// expire) with `decide_settlement`, atomically. `None` when there is no such operation.
    async fn settle(
        &self,
        id: Uuid,
        settlement: &Settlement,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, SettleRefused>>>, StoreError>;

    /// Takes up to `limit` `unknown` operations of these tools that are due for
    /// reconciliation, and holds them for `hold_seconds` (their `next_reconcile_at` moves
    /// past the hold) so that no other reconciler, in this process or another, asks about
    /// them meanwhile. Each tool comes with its grace in milliseconds: an operation is due
    /// only that long after it became unknown, because the call that left it unknown may
    /// still reach the provider until then.
    async fn take_due_reconciliations(
        &self,
        tools: &[(ToolName, u32)],
        limit: u32,
        hold_seconds: u32,
    ) -> Result<Vec<Operation>, StoreError>;

    /// Marks `unknown` (with `expire_lease_at`) up to `limit` pending operations whose lease
    /// ran out, of tools whose calls must not be repeated; returns how many. Several processes
    /// may run this at once: each operation is expired once.
    async fn expire_leases(&self, limit: u32) -> Result<usize, StoreError>;

    /// Records events that change no state (replays, refused duplicates). They are written
    /// behind, in batches: this returns at once, a read of events or metrics through this
    /// store sees them, and a crash may lose the last of them (never a state change's).
    fn record_quiet_events(&self, events: Vec<Event>);

    /// An operation by id, in any namespace (callers check the namespace).
    async fn operation(&self, id: Uuid) -> Result<Option<Operation>, StoreError>;

    /// Operations matching the filter, newest first, after the cursor's operation.
    async fn list(
        &self,
        filter: &OperationFilter,
        limit: u32,
    ) -> Result<Vec<Operation>, StoreError>;

    /// How many live operations wait for a person's verdict, in every namespace (the
    /// header's count; the awaiting-approval gauge counts the same rows).
    async fn count_awaiting_approval(&self) -> Result<u64, StoreError>;

    /// The audit trail of an operation, oldest first.
    async fn events(&self, id: Uuid) -> Result<Vec<Event>, StoreError>;

    /// One page of an operation's audit trail, in the page's order, each event with its
    /// position (at most `page.limit` of them).
    async fn events_page(
        &self,
        id: Uuid,
        page: &EventPage,
    ) -> Result<Vec<(EventPosition, Event)>, StoreError>;

    /// The registered policy of a tool.
    async fn tool(&self, name: &ToolName) -> Result<Option<ToolPolicy>, StoreError>;

    /// Registers or replaces a tool's policy.
    async fn put_tool(
        &self,
        name: &ToolName,
        policy: &ToolPolicy,
    ) -> Result<RegisteredTool, StoreError>;

    /// Every registered tool, by name.
    async fn tools(&self) -> Result<Vec<RegisteredTool>, StoreError>;
}

/// Where an event stands in its operation's trail: by time, then by the order it was
/// written (events of one instant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPosition {
    pub at: DateTime<Utc>,
    pub seq: i64,
}

/// Cursors of an operation's events: `e1_`, the event's time in microseconds since the epoch,
/// `_`, its writing order.
const EVENT_CURSOR_PREFIX: &str = "e1_";

impl EventPosition {
    /// The opaque cursor of the page after this event.
    pub fn cursor(&self) -> String {
        format!(
            "{EVENT_CURSOR_PREFIX}{}_{}",
            self.at.timestamp_micros(),
            self.seq
        )
    }

    /// The position a cursor names, if it is one this server gives out.
    pub fn from_cursor(cursor: &str) -> Option<Self> {
        let (micros, seq) = cursor.strip_prefix(EVENT_CURSOR_PREFIX)?.split_once('_')?;
        Some(Self {
            at: DateTime::<Utc>::from_timestamp_micros(micros.parse().ok()?)?,
            seq: seq.parse().ok()?,
        })
    }
}

/// Which part of an operation's trail to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPage {
    /// Only events after this one, in the page's order.
    pub after: Option<EventPosition>,
    pub limit: u32,
    /// Newest first, rather than oldest first.
    pub newest_first: bool,
}

/// Which operations a list shows. `None` fields do not filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperationFilter {
    pub namespace: Option<Namespace>,
    pub status: Option<OperationStatus>,
    pub tool: Option<ToolName>,
    pub run_id: Option<String>,
    /// Only keys that contain this text (the dashboard's key search).
    pub key_contains: Option<String>,
    /// Oldest first (queues: approvals, unknowns) instead of newest first.
    pub oldest_first: bool,
    /// Keyset pagination: only operations past this one in the chosen order (ids are
    /// UUIDv7, so they order by creation).
    pub before: Option<Uuid>,
    /// Only operations created at or after this moment.
    pub created_since: Option<DateTime<Utc>>,
    /// Only operations created before this moment.
    pub created_until: Option<DateTime<Utc>>,
    /// Only stuck ones: `unknown` for longer than this, by the database's clock (as the
    /// stuck gauge counts them).
    pub unknown_longer_than: Option<TimeDelta>,
}

/// A tool as registered.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTool {
    pub name: ToolName,
    pub policy: ToolPolicy,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
