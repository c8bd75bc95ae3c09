//! Rows bound as one array per column, for statements that `unnest` them: the statement's
//! text is the same for any number of rows, so PostgreSQL parses it once per connection and
//! plans it without a value per row, where a `values` list of placeholders is a new
//! statement for every number of rows, parsed and planned at each run.

use app::ledger::{Approval, Event};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgArguments, Postgres};
use sqlx::query::Query;
use sqlx::types::Json;
use uuid::Uuid;

use crate::storage::operation_rows::{CreatedValues, UpdatedValues};

/// A statement whose values are being bound.
pub(super) type Statement<'q> = Query<'q, Postgres, PgArguments>;

/// `CREATED_COLUMNS`, one array each.
#[derive(Default)]
pub(super) struct CreatedColumns {
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

impl CreatedColumns {
    /// How many columns (placeholders) it binds.
    pub(super) const COUNT: usize = 14;

    pub(super) fn push(&mut self, values: CreatedValues) {
        let CreatedValues {
            id,
            namespace,
            key,
            key_source,
            tool,
            effect,
            fingerprint,
            provider_key,
            args,
            run_id,
            step,
            created_at,
            runner,
            ttl_seconds,
        } = values;
        self.id.push(id);
        self.namespace.push(namespace);
        self.key.push(key);
        self.key_source.push(key_source);
        self.tool.push(tool);
        self.effect.push(effect);
        self.fingerprint.push(fingerprint);
        self.provider_key.push(provider_key);
        self.args.push(args);
        self.run_id.push(run_id);
        self.step.push(step);
        self.created_at.push(created_at);
        self.runner.push(runner);
        self.ttl_seconds.push(ttl_seconds);
    }

    /// Binds its arrays, in the order of `CREATED_COLUMNS`.
    pub(super) fn bind(self, statement: Statement<'_>) -> Statement<'_> {
        statement
            .bind(self.id)
            .bind(self.namespace)
            .bind(self.key)
            .bind(self.key_source)
            .bind(self.tool)
            .bind(self.effect)
            .bind(self.fingerprint)
            .bind(self.provider_key)
            .bind(self.args)
            .bind(self.run_id)
            .bind(self.step)
            .bind(self.created_at)
            .bind(self.runner)
            .bind(self.ttl_seconds)
    }
}

/// `UPDATED_COLUMNS`, one array each.
#[derive(Default)]
pub(super) struct UpdatedColumns {
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

impl UpdatedColumns {
    /// How many columns (placeholders) it binds.
    pub(super) const COUNT: usize = 16;

    pub(super) fn push(&mut self, values: UpdatedValues) {
        let UpdatedValues {
            status,
            attempt,
            result,
            error,
            retryable,
            provider_ref,
            lease_token,
            lease_expires_at,
            updated_at,
            completed_at,
            expires_at,
            approval,
            approval_expires_at,
            unknown_since,
            reconcile_attempts,
            next_reconcile_at,
        } = values;
        self.status.push(status);
        self.attempt.push(attempt);
        self.result.push(result);
        self.error.push(error);
        self.retryable.push(retryable);
        self.provider_ref.push(provider_ref);
        self.lease_token.push(lease_token);
        self.lease_expires_at.push(lease_expires_at);
        self.updated_at.push(updated_at);
        self.completed_at.push(completed_at);
        self.expires_at.push(expires_at);
        self.approval.push(approval);
        self.approval_expires_at.push(approval_expires_at);
        self.unknown_since.push(unknown_since);
        self.reconcile_attempts.push(reconcile_attempts);
        self.next_reconcile_at.push(next_reconcile_at);
    }

    /// Binds its arrays, in the order of `UPDATED_COLUMNS`.
    pub(super) fn bind(self, statement: Statement<'_>) -> Statement<'_> {
        statement
            .bind(self.status)
            .bind(self.attempt)
            .bind(self.result)
            .bind(self.error)
            .bind(self.retryable)
            .bind(self.provider_ref)
            .bind(self.lease_token)
            .bind(self.lease_expires_at)
            .bind(self.updated_at)
            .bind(self.completed_at)
            .bind(self.expires_at)
            .bind(self.approval)
            .bind(self.approval_expires_at)
            .bind(self.unknown_since)
            .bind(self.reconcile_attempts)
            .bind(self.next_reconcile_at)
    }
}

/// Events to insert, each with its place among them (`i`) and its change's place in the
/// batch (`n`), one array each.
#[derive(Default)]
pub(super) struct EventColumns<'a> {
    i: Vec<i32>,
    n: Vec<i32>,
    operation_id: Vec<Uuid>,
    at: Vec<DateTime<Utc>>,
    kind: Vec<&'static str>,
    actor: Vec<&'a str>,
    detail: Vec<Json<&'a Value>>,
}

impl<'a> EventColumns<'a> {
    /// How many columns (placeholders) it binds.
    pub(super) const COUNT: usize = 7;

    /// Adds `event` of the batch's `n`th change.
    pub(super) fn push(&mut self, n: usize, event: &'a Event) {
        self.i.push(place(self.i.len()));
        self.n.push(place(n));
        self.operation_id.push(event.operation_id);
        self.at.push(event.at);
        self.kind.push(event.kind.as_str());
        self.actor.push(&event.actor);
        self.detail.push(Json(&event.detail));
    }

    /// Binds its arrays: `i, n, operation_id, at, kind, actor, detail`.
    pub(super) fn bind(self, statement: Statement<'a>) -> Statement<'a> {
        statement
            .bind(self.i)
            .bind(self.n)
            .bind(self.operation_id)
            .bind(self.at)
            .bind(self.kind)
            .bind(self.actor)
            .bind(self.detail)
    }
}

/// A place in a batch, as PostgreSQL's `integer` (a batch is far shorter than its range).
pub(super) fn place(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
