//! Settling what the lease holder could not: reconciliation (the provider's answer about the
//! key), the executor's late answer, and a person's manual interventions (resolve, expire).
//! Pure, like the other rules: the store runs [`decide_settlement`] in the transaction that
//! holds the operation, so a settlement that raced another one is refused, never applied twice.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use super::model::{Event, EventKind, Operation};
use super::provider::{Execution, Lookup, LookupError};
use super::write::{Decision, Write};
use crate::domain::{transition, InvalidTransition, OperationStatus, Outcome, Transition};

/// How long the reconciler waits before asking again after the n-th failed lookup (then the
/// last step, for as long as it takes).
pub const RECONCILE_BACKOFF_SECONDS: [i64; 5] = [5, 30, 120, 600, 3600];

/// What settles an operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    /// The provider's answer about the operation's key, or why there was none.
    Reconcile(Result<Lookup, LookupError>),
    /// The executor's answer arrived after the lease ran out and the operation became
    /// `unknown`: it is as good as the provider's lookup.
    LateExecution(Execution),
    /// A person settles a `pending` or `unknown` operation by hand.
    Resolve(Resolution),
    /// A person ends the key's life now; the next claim starts a new operation.
    Expire { reason: String },
}

/// A person's manual settlement.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub outcome: Outcome,
    pub result: Option<Value>,
    pub error: Option<Value>,
    /// For `failed`: whether the next claim may run it again.
    pub retryable: bool,
    pub reason: String,
}

/// Why a settlement was refused; nothing changed (except the record of a failed lookup).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettleRefused {
    /// 409 `operation_not_unknown`: only `unknown` operations are reconciled.
    #[error("the operation is {status}, not unknown; there is nothing to reconcile")]
    NotUnknown { status: OperationStatus },
    /// 409: the status does not allow it (`operation_already_final`, `invalid_transition`).
    #[error("{0}")]
    Transition(#[from] InvalidTransition),
    /// 502 `provider_unavailable`: the provider could not answer; the attempt is recorded and
    /// the reconciler asks again at `next_attempt_at`.
    #[error(
        "the provider could not answer ({message}); reconciliation asks again at {next_attempt_at}"
    )]
    ProviderUnavailable {
        message: String,
        next_attempt_at: DateTime<Utc>,
    },
}

/// Decides a settlement of the stored operation by `actor` at `now`.
pub fn decide_settlement(
    operation: Operation,
    settlement: &Settlement,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    match settlement {
        Settlement::Reconcile(Ok(lookup)) => reconcile(operation, lookup, actor, now, "lookup"),
        Settlement::Reconcile(Err(error)) => lookup_failed(operation, error, actor, now),
        Settlement::LateExecution(execution) => late_execution(operation, execution, actor, now),
        Settlement::Resolve(resolution) => resolve(operation, resolution, actor, now),
        Settlement::Expire { reason } => expire(operation, reason, actor, now),
    }
}

fn refused(why: SettleRefused) -> Decision<Result<Operation, SettleRefused>> {
    Decision::answer(Err(why), Vec::new())
}

/// The one write and event of a settlement that changed the operation.
fn settled(
    before: &Operation,
    after: Operation,
    kind: EventKind,
    actor: &str,
    detail: Value,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    let event = Event {
        operation_id: after.id,
        at: now,
        kind,
        actor: actor.to_owned(),
        detail,
    };
    Decision {
        writes: vec![Write::Update {
            after: after.clone(),
            expected_status: before.status,
        }],
        events: vec![event],
        outcome: Ok(after),
    }
}

fn unknown_for_ms(operation: &Operation, now: DateTime<Utc>) -> i64 {
    let since = operation.unknown_since.unwrap_or(operation.updated_at);
    (now - since).num_milliseconds().max(0)
}

/// Ends an operation's open life: no lease, nothing more to reconcile.
fn close(after: &mut Operation, now: DateTime<Utc>) {
    after.updated_at = now;
    after.settle_at(now);
    after.lease = None;
    after.next_reconcile_at = None;
}

fn reconcile(
    operation: Operation,
    lookup: &Lookup,
    actor: &str,
    now: DateTime<Utc>,
    source: &str,
) -> Decision<Result<Operation, SettleRefused>> {
    match lookup {
        Lookup::Found {
            result,
            provider_ref,
        } => settle_unknown(operation, true, actor, now, source, |after| {
            after.result = after.redact_answer(Some(result));
            after.error = None;
            after.retryable = false;
            after.provider_ref = provider_ref.clone().or(after.provider_ref.take());
        }),
        Lookup::NotFound => settle_unknown(operation, false, actor, now, source, |after| {
            after.error = Some(json!({
                "code": "not_found_by_provider",
                "message": "the provider never saw this key: the call did not take effect, and a retry may run it",
            }));
            after.retryable = true;
        }),
    }
}

/// Moves an `unknown` operation to `succeeded` (`found`) or `failed`, filled in by `fill`.
fn settle_unknown(
    operation: Operation,
    found: bool,
    actor: &str,
    now: DateTime<Utc>,
    source: &str,
    fill: impl FnOnce(&mut Operation),
) -> Decision<Result<Operation, SettleRefused>> {
    if operation.status != OperationStatus::Unknown {
        let status = operation.status;
        return refused(SettleRefused::NotUnknown { status });
    }
    let mut after = operation.clone();
    after.move_by(Transition::Reconcile { found });
    close(&mut after, now);
    fill(&mut after);
    let detail = json!({
        "found": found,
        "status": after.status,
        "provider_ref": after.provider_ref,
        "unknown_for_ms": unknown_for_ms(&operation, now),
        "failed_lookups": operation.reconcile_attempts,
        "source": source,
    });
    settled(&operation, after, EventKind::Reconciled, actor, detail, now)
}

fn lookup_failed(
    operation: Operation,
    error: &LookupError,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    if operation.status != OperationStatus::Unknown {
        let status = operation.status;
        return refused(SettleRefused::NotUnknown { status });
    }
    let mut after = operation.clone();
    after.reconcile_attempts += 1;
    let step = usize::try_from(after.reconcile_attempts - 1)
        .unwrap_or(usize::MAX)
        .min(RECONCILE_BACKOFF_SECONDS.len() - 1);
    let next_attempt_at = now + Duration::seconds(RECONCILE_BACKOFF_SECONDS[step]);
    // `updated_at` stays: the operation has been stuck since it became unknown, and a failed
    // lookup does not change that.
    after.next_reconcile_at = Some(next_attempt_at);
    let detail = json!({
        "error": error.0,
        "failed_lookups": after.reconcile_attempts,
        "next_attempt_at": next_attempt_at,
    });
    let mut decision = settled(
        &operation,
        after,
        EventKind::ReconcileAttempted,
        actor,
        detail,
        now,
    );
    decision.outcome = Err(SettleRefused::ProviderUnavailable {
        message: error.0.clone(),
        next_attempt_at,
    });
    decision
}

fn late_execution(
    operation: Operation,
    execution: &Execution,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    match execution {
        Execution::Succeeded {
            result,
            provider_ref,
        } => {
            let lookup = Lookup::Found {
                result: result.clone(),
                provider_ref: provider_ref.clone(),
            };
            reconcile(operation, &lookup, actor, now, "late_execution")
        }
        Execution::Failed { error, retryable } => {
            settle_unknown(operation, false, actor, now, "late_execution", |after| {
                after.error = after.redact_answer(Some(error));
                after.retryable = *retryable;
            })
        }
        // Still nobody knows: the operation stays `unknown` for the reconciler.
        Execution::Unknown { .. } => Decision::answer(Ok(operation), Vec::new()),
    }
}

fn resolve(
    operation: Operation,
    resolution: &Resolution,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    let event = Transition::Resolve(resolution.outcome);
    if let Err(invalid) = transition(operation.status, event) {
        return refused(invalid.into());
    }
    let mut after = operation.clone();
    after.move_by(event);
    close(&mut after, now);
    match resolution.outcome {
        Outcome::Succeeded => {
            after.result = after.redact_answer(resolution.result.as_ref());
            after.error = None;
            after.retryable = false;
        }
        Outcome::Failed => {
            after.result = None;
            after.error = after.redact_answer(resolution.error.as_ref()).or_else(|| {
                Some(json!({ "code": "resolved_by_operator", "message": resolution.reason }))
            });
            after.retryable = resolution.retryable;
        }
    }
    let detail = json!({
        "outcome": resolution.outcome,
        "reason": resolution.reason,
        "previous_status": operation.status,
        "retryable": after.retryable,
    });
    settled(&operation, after, EventKind::Resolved, actor, detail, now)
}

fn expire(
    operation: Operation,
    reason: &str,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, SettleRefused>> {
    if let Err(invalid) = transition(operation.status, Transition::Expire) {
        return refused(invalid.into());
    }
    let mut after = operation.clone();
    after.move_by(Transition::Expire);
    after.expires_at = now;
    after.updated_at = now;
    let detail = json!({
        "reason": reason,
        "status": operation.status,
        "previous_expires_at": operation.expires_at,
    });
    settled(&operation, after, EventKind::Expired, actor, detail, now)
}

#[cfg(test)]
mod tests;
