//! Operations and events as both databases return them. Enums and checked names are stored
//! as their serde text, so the database and the API always spell them the same way.

use app::domain::ToolPolicy;
use app::ledger::{
    Approval, Event, EventKind, EventPage, EventPosition, HeldLease, LeaseTokenHash, Operation,
    OperationFilter, RegisteredTool,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::dialect::{Dialect, PushValue};

/// Columns selected for an operation, in `OperationRow` order.
pub const OPERATION_COLUMNS: &str = "id, namespace, key, key_source, tool, effect, fingerprint, provider_key, args, run_id, step, \
     status, attempt, result, error, retryable, provider_ref, lease_token, lease_expires_at, created_at, updated_at, \
     completed_at, expires_at, approval, approval_expires_at, runner, unknown_since, reconcile_attempts, next_reconcile_at, \
     ttl_seconds";

/// The list query for a filter, for either database. Only the filters given become
/// conditions: a generic `($1 is null or status = $1)` would keep SQLite (which plans once per
/// text) from using any index but the primary key's, walking operations newest first until
/// enough match — seconds at a million operations when few do.
/// `now` is the database's time, from which the stuck filter counts.
pub(crate) fn list_query<'a, DB: Dialect>(
    filter: &'a OperationFilter,
    limit: u32,
    now: DateTime<Utc>,
) -> QueryBuilder<'a, DB> {
    let mut query = QueryBuilder::new(format!(
        "select {OPERATION_COLUMNS} from operations where true"
    ));
    if let Some(namespace) = &filter.namespace {
        query
            .push(" and namespace = ")
            .push_value(namespace.to_string());
    }
    if let Some(status) = &filter.status {
        query.push(" and status = ").push_value(to_text(status));
    }
    if let Some(tool) = &filter.tool {
        query.push(" and tool = ").push_value(to_text(tool));
    }
    if let Some(run_id) = &filter.run_id {
        query.push(" and run_id = ").push_value(run_id.clone());
    }
    if let Some(since) = filter.created_since {
        query.push(" and created_at >= ").push_value(since);
    }
    if let Some(until) = filter.created_until {
        query.push(" and created_at < ").push_value(until);
    }
    if let Some(stuck_after) = filter.unknown_longer_than {
        query
            // The gauge's rule (`metrics_sql`): rows older than `unknown_since` count from
            // their last change.
            .push(" and status = 'unknown' and coalesce(unknown_since, updated_at) < ")
            .push_value(now - stuck_after);
    }
    let (past, order) = if filter.oldest_first {
        (" and id > ", " order by id asc")
    } else {
        (" and id < ", " order by id desc")
    };
    if let Some(before) = filter.before {
        query.push(past).push_value(before);
    }
    if let Some(text) = &filter.key_contains {
        query
            .push(" and key like ")
            .push_value(contains_pattern(text))
            .push(" escape '\\'");
    }
    query
        .push(order)
        .push(" limit ")
        .push_value(i64::from(limit));
    query
}

/// A `LIKE` pattern that matches any text containing `text` literally.
pub fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// An operation row.
#[derive(sqlx::FromRow)]
pub struct OperationRow {
    id: Uuid,
    namespace: String,
    key: String,
    key_source: String,
    tool: String,
    effect: String,
    fingerprint: String,
    provider_key: String,
    args: Json<Value>,
    run_id: Option<String>,
    step: Option<i64>,
    status: String,
    attempt: i32,
    result: Option<Json<Value>>,
    error: Option<Json<Value>>,
    retryable: bool,
    provider_ref: Option<String>,
    lease_token: Option<String>,
    lease_expires_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    completed_at: Option<DateTime<Utc>>,
    expires_at: DateTime<Utc>,
    approval: Option<Json<Approval>>,
    approval_expires_at: Option<DateTime<Utc>>,
    runner: String,
    unknown_since: Option<DateTime<Utc>>,
    reconcile_attempts: i32,
    next_reconcile_at: Option<DateTime<Utc>>,
    /// Null for operations stored before the column existed.
    ttl_seconds: Option<i64>,
}

/// Parses stored text through the type's serde form (and so through its checks).
pub fn from_text<T: DeserializeOwned>(text: String) -> Result<T, StoreError> {
    serde_json::from_value(Value::String(text)).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The text a value is stored as: its serde form.
pub fn to_text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        other => unreachable!("stored enums and names serialize as strings, not {other:?}"),
    }
}

impl TryFrom<OperationRow> for Operation {
    type Error = StoreError;
    fn try_from(row: OperationRow) -> Result<Self, StoreError> {
        let lease = match (row.lease_token, row.lease_expires_at) {
            (Some(stored), Some(expires_at)) => Some(HeldLease {
                token_hash: LeaseTokenHash::from_stored(stored).ok_or_else(|| {
                    StoreError::Corrupt(
                        "a lease token is stored in clear, not as its digest".into(),
                    )
                })?,
                expires_at,
            }),
            _ => None,
        };
        Ok(Operation {
            id: row.id,
            namespace: from_text(row.namespace)?,
            key: from_text(row.key)?,
            key_source: from_text(row.key_source)?,
            tool: from_text(row.tool)?,
            effect: from_text(row.effect)?,
            fingerprint: from_text(row.fingerprint)?,
            provider_key: row.provider_key,
            args: row.args.0,
            run_id: row.run_id,
            step: row.step.map(|step| step.unsigned_abs()),
            status: from_text(row.status)?,
            attempt: row.attempt.unsigned_abs(),
            result: row.result.map(|json| json.0),
            error: row.error.map(|json| json.0),
            retryable: row.retryable,
            provider_ref: row.provider_ref,
            created_at: row.created_at,
            updated_at: row.updated_at,
            completed_at: row.completed_at,
            expires_at: row.expires_at,
            approval: row.approval.map(|json| json.0),
            approval_expires_at: row.approval_expires_at,
            runner: from_text(row.runner)?,
            unknown_since: row.unknown_since,
            reconcile_attempts: row.reconcile_attempts.unsigned_abs(),
            next_reconcile_at: row.next_reconcile_at,
            ttl_seconds: stored_ttl(row.ttl_seconds, row.created_at, row.expires_at),
            lease,
        })
    }
}

/// An operation's time to live as stored; for one stored before it was (null), the span its
/// expiry was given at creation.
fn stored_ttl(
    ttl_seconds: Option<i64>,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> u32 {
    let seconds = ttl_seconds.unwrap_or_else(|| (expires_at - created_at).num_seconds());
    u32::try_from(seconds.max(0)).unwrap_or(u32::MAX)
}

/// An event row.
#[derive(sqlx::FromRow)]
pub struct EventRow {
    operation_id: Uuid,
    at: DateTime<Utc>,
    kind: String,
    actor: String,
    detail: Json<Value>,
}

impl TryFrom<EventRow> for Event {
    type Error = StoreError;
    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(Event {
            operation_id: row.operation_id,
            at: row.at,
            kind: from_text::<EventKind>(row.kind)?,
            actor: row.actor,
            detail: row.detail.0,
        })
    }
}

/// An event row with its position in the trail.
#[derive(sqlx::FromRow)]
pub struct PositionedEventRow {
    #[sqlx(flatten)]
    event: EventRow,
    seq: i64,
}

impl PositionedEventRow {
    pub fn into_positioned(self) -> Result<(EventPosition, Event), StoreError> {
        let position = EventPosition {
            at: self.event.at,
            seq: self.seq,
        };
        Ok((position, Event::try_from(self.event)?))
    }
}

/// The query of an events page: `$1` the operation, then (with a cursor) `$2`, `$3` the
/// position after which the page starts, then the limit. Row values compare by time, then by
/// writing order, as the `operation_events_by_time` index is laid out.
pub fn events_page_sql(page: &EventPage) -> &'static str {
    match (page.after.is_some(), page.newest_first) {
        (false, false) => {
            "select operation_id, at, kind, actor, detail, seq from operation_events \
            where operation_id = $1 order by at, seq limit $2"
        }
        (false, true) => {
            "select operation_id, at, kind, actor, detail, seq from operation_events \
            where operation_id = $1 order by at desc, seq desc limit $2"
        }
        (true, false) => {
            "select operation_id, at, kind, actor, detail, seq from operation_events \
            where operation_id = $1 and (at, seq) > ($2, $3) order by at, seq limit $4"
        }
        (true, true) => {
            "select operation_id, at, kind, actor, detail, seq from operation_events \
            where operation_id = $1 and (at, seq) < ($2, $3) order by at desc, seq desc limit $4"
        }
    }
}

/// The columns of an operation that no transition changes, in the order
/// `push_operation_row` binds them before `UPDATED_COLUMNS`.
pub const CREATED_COLUMNS: &str = "id, namespace, key, key_source, tool, effect, fingerprint, \
    provider_key, args, run_id, step, created_at, runner, ttl_seconds";

/// The columns a transition of an operation may change (all but its identity, its
/// request and its creation), in the order `push_updated_values` binds them.
pub const UPDATED_COLUMNS: &str = "status, attempt, result, error, retryable, provider_ref, \
    lease_token, lease_expires_at, updated_at, completed_at, expires_at, approval, \
    approval_expires_at, unknown_since, reconcile_attempts, next_reconcile_at";

/// The values of `CREATED_COLUMNS`, to bind.
pub struct CreatedValues {
    pub id: Uuid,
    pub namespace: String,
    pub key: String,
    pub key_source: String,
    pub tool: String,
    pub effect: String,
    pub fingerprint: String,
    pub provider_key: String,
    pub args: Json<Value>,
    pub run_id: Option<String>,
    pub step: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub runner: String,
    pub ttl_seconds: i64,
}

impl From<&Operation> for CreatedValues {
    fn from(op: &Operation) -> Self {
        Self {
            id: op.id,
            namespace: op.namespace.to_string(),
            key: to_text(&op.key),
            key_source: to_text(&op.key_source),
            tool: to_text(&op.tool),
            effect: to_text(&op.effect),
            fingerprint: to_text(&op.fingerprint),
            provider_key: op.provider_key.clone(),
            args: Json(op.args.clone()),
            run_id: op.run_id.clone(),
            step: op.step.map(|step| i64::try_from(step).unwrap_or(i64::MAX)),
            created_at: op.created_at,
            runner: to_text(&op.runner),
            ttl_seconds: i64::from(op.ttl_seconds),
        }
    }
}

/// The values of `UPDATED_COLUMNS`, to bind.
pub struct UpdatedValues {
    pub status: String,
    pub attempt: i32,
    pub result: Option<Json<Value>>,
    pub error: Option<Json<Value>>,
    pub retryable: bool,
    pub provider_ref: Option<String>,
    pub lease_token: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
    pub approval: Option<Json<Approval>>,
    pub approval_expires_at: Option<DateTime<Utc>>,
    pub unknown_since: Option<DateTime<Utc>>,
    pub reconcile_attempts: i32,
    pub next_reconcile_at: Option<DateTime<Utc>>,
}

impl From<&Operation> for UpdatedValues {
    fn from(op: &Operation) -> Self {
        Self {
            status: to_text(&op.status),
            attempt: i32::try_from(op.attempt).unwrap_or(i32::MAX),
            result: op.result.clone().map(Json),
            error: op.error.clone().map(Json),
            retryable: op.retryable,
            provider_ref: op.provider_ref.clone(),
            lease_token: op
                .lease
                .as_ref()
                .map(|lease| lease.token_hash.as_str().to_owned()),
            lease_expires_at: op.lease.as_ref().map(|lease| lease.expires_at),
            updated_at: op.updated_at,
            completed_at: op.completed_at,
            expires_at: op.expires_at,
            approval: op.approval.clone().map(Json),
            approval_expires_at: op.approval_expires_at,
            unknown_since: op.unknown_since,
            reconcile_attempts: i32::try_from(op.reconcile_attempts).unwrap_or(i32::MAX),
            next_reconcile_at: op.next_reconcile_at,
        }
    }
}

/// A tool registration row.
#[derive(sqlx::FromRow)]
pub struct ToolRow {
    name: String,
    policy: Json<ToolPolicy>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<ToolRow> for RegisteredTool {
    type Error = StoreError;
    fn try_from(row: ToolRow) -> Result<Self, StoreError> {
        Ok(RegisteredTool {
            name: from_text(row.name)?,
            policy: row.policy.0,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}
