//! A batch's rows bound as one array per column and read back with `unnest`, so that the
//! statement's text is the same for any number of rows: PostgreSQL parses and plans it once
//! per connection instead of once per batch (a batch's row values, bound one by one, made a
//! new text for each size, and parsing and planning it cost more than running it).

use app::ledger::{Approval, Event, Operation};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgHasArrayType;
use sqlx::types::Json;
use sqlx::{Encode, Postgres, QueryBuilder, Type};
use uuid::Uuid;

use crate::storage::operation_rows::{CreatedValues, UpdatedValues};

/// `unnest($1::t1[], $2::t2[], …)`, one bound array per call of `column`.
pub(super) struct Unnest<'q, 'a> {
    sql: &'q mut QueryBuilder<'a, Postgres>,
    columns: usize,
}

impl<'q, 'a> Unnest<'q, 'a> {
    /// Opens `unnest(` in `sql`.
    pub(super) fn new(sql: &'q mut QueryBuilder<'a, Postgres>) -> Self {
        sql.push("unnest(");
        Self { sql, columns: 0 }
    }

    /// Binds `values` as the next column, cast to `sql_type[]`.
    pub(super) fn column<T>(&mut self, values: Vec<T>, sql_type: &str) -> &mut Self
    where
        T: PgHasArrayType + Send + 'a,
        for<'e> Vec<T>: Encode<'e, Postgres> + Type<Postgres>,
    {
        if self.columns > 0 {
            self.sql.push(", ");
        }
        self.sql
            .push_bind(values)
            .push(format_args!("::{sql_type}[]"));
        self.columns += 1;
        self
    }

    /// Closes the `unnest(…)`.
    pub(super) fn end(self) {
        self.sql.push(")");
    }
}

/// Operations to insert: their `CREATED_COLUMNS`, then their `UPDATED_COLUMNS`.
#[derive(Default)]
pub(super) struct OperationArrays {
    created: CreatedArrays,
    updated: UpdatedArrays,
}

impl OperationArrays {
    pub(super) fn push(&mut self, operation: &Operation) {
        self.created.push(CreatedValues::from(operation));
        self.updated.push(UpdatedValues::from(operation));
    }

    /// Binds every column, in the order `CREATED_COLUMNS, UPDATED_COLUMNS`.
    pub(super) fn bind(self, unnest: &mut Unnest<'_, '_>) {
        self.created.bind(unnest);
        self.updated.bind(unnest);
    }
}

/// `CREATED_COLUMNS`, one array each.
#[derive(Default)]
struct CreatedArrays {
    id: Vec<Uuid>,
    namespace: Vec<String>,
    key: Vec<String>,
    key_source: Vec<String>,
    tool: Vec<String>,
    effect: Vec<String>,
    fingerprint: Vec<String>,
    provider_key: Vec<String>,
    args: Vec<Json<Value>>,
    run_id: Vec<Option<String>>,
    step: Vec<Option<i64>>,
    created_at: Vec<DateTime<Utc>>,
    runner: Vec<String>,
    ttl_seconds: Vec<i64>,
}

impl CreatedArrays {
    fn push(&mut self, v: CreatedValues) {
        self.id.push(v.id);
        self.namespace.push(v.namespace);
        self.key.push(v.key);
        self.key_source.push(v.key_source);
        self.tool.push(v.tool);
        self.effect.push(v.effect);
        self.fingerprint.push(v.fingerprint);
        self.provider_key.push(v.provider_key);
        self.args.push(v.args);
        self.run_id.push(v.run_id);
        self.step.push(v.step);
        self.created_at.push(v.created_at);
        self.runner.push(v.runner);
        self.ttl_seconds.push(v.ttl_seconds);
    }

    fn bind(self, unnest: &mut Unnest<'_, '_>) {
        unnest
            .column(self.id, "uuid")
            .column(self.namespace, "text")
            .column(self.key, "text")
            .column(self.key_source, "text")
            .column(self.tool, "text")
            .column(self.effect, "text")
            .column(self.fingerprint, "text")
            .column(self.provider_key, "text")
            .column(self.args, "jsonb")
            .column(self.run_id, "text")
            .column(self.step, "bigint")
            .column(self.created_at, "timestamptz")
            .column(self.runner, "text")
            .column(self.ttl_seconds, "bigint");
    }
}

/// `UPDATED_COLUMNS`, one array each.
#[derive(Default)]
pub(super) struct UpdatedArrays {
    status: Vec<String>,
    attempt: Vec<i32>,
    result: Vec<Option<Json<Value>>>,
    error: Vec<Option<Json<Value>>>,
    retryable: Vec<bool>,
    provider_ref: Vec<Option<String>>,
    lease_token: Vec<Option<String>>,
    lease_expires_at: Vec<Option<DateTime<Utc>>>,
    updated_at: Vec<DateTime<Utc>>,
    completed_at: Vec<Option<DateTime<Utc>>>,
    expires_at: Vec<DateTime<Utc>>,
    approval: Vec<Option<Json<Approval>>>,
    approval_expires_at: Vec<Option<DateTime<Utc>>>,
    unknown_since: Vec<Option<DateTime<Utc>>>,
    reconcile_attempts: Vec<i32>,
    next_reconcile_at: Vec<Option<DateTime<Utc>>>,
}

impl UpdatedArrays {
    pub(super) fn push(&mut self, v: UpdatedValues) {
        self.status.push(v.status);
        self.attempt.push(v.attempt);
        self.result.push(v.result);
        self.error.push(v.error);
        self.retryable.push(v.retryable);
        self.provider_ref.push(v.provider_ref);
        self.lease_token.push(v.lease_token);
        self.lease_expires_at.push(v.lease_expires_at);
        self.updated_at.push(v.updated_at);
        self.completed_at.push(v.completed_at);
        self.expires_at.push(v.expires_at);
        self.approval.push(v.approval);
        self.approval_expires_at.push(v.approval_expires_at);
        self.unknown_since.push(v.unknown_since);
        self.reconcile_attempts.push(v.reconcile_attempts);
        self.next_reconcile_at.push(v.next_reconcile_at);
    }

    /// Binds every column, in the order of `UPDATED_COLUMNS`.
    pub(super) fn bind(self, unnest: &mut Unnest<'_, '_>) {
        unnest
            .column(self.status, "text")
            .column(self.attempt, "integer")
            .column(self.result, "jsonb")
            .column(self.error, "jsonb")
            .column(self.retryable, "boolean")
            .column(self.provider_ref, "text")
            .column(self.lease_token, "text")
            .column(self.lease_expires_at, "timestamptz")
            .column(self.updated_at, "timestamptz")
            .column(self.completed_at, "timestamptz")
            .column(self.expires_at, "timestamptz")
            .column(self.approval, "jsonb")
            .column(self.approval_expires_at, "timestamptz")
            .column(self.unknown_since, "timestamptz")
            .column(self.reconcile_attempts, "integer")
            .column(self.next_reconcile_at, "timestamptz");
    }
}

/// Events to insert, each with the place of its change in the batch (`n`).
#[derive(Default)]
pub(super) struct EventArrays {
    n: Vec<i32>,
    operation_id: Vec<Uuid>,
    at: Vec<DateTime<Utc>>,
    kind: Vec<String>,
    actor: Vec<String>,
    detail: Vec<Json<Value>>,
}

impl EventArrays {
    pub(super) fn push(&mut self, n: usize, event: &Event) {
        self.n.push(n as i32);
        self.operation_id.push(event.operation_id);
        self.at.push(event.at);
        self.kind.push(event.kind.as_str().to_owned());
        self.actor.push(event.actor.clone());
        self.detail.push(Json(event.detail.clone()));
    }

    /// Binds the columns `n, operation_id, at, kind, actor, detail`.
    pub(super) fn bind(self, unnest: &mut Unnest<'_, '_>) {
        unnest
            .column(self.n, "integer")
            .column(self.operation_id, "uuid")
            .column(self.at, "timestamptz")
            .column(self.kind, "text")
            .column(self.actor, "text")
            .column(self.detail, "jsonb");
    }
}
