//! Reporting an outcome under a lease: `complete` and `unknown`.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::model::{Event, EventKind, Operation};
use super::write::{Decision, Write};
use crate::domain::{OperationStatus, Outcome, Transition};

/// The outcome a lease holder reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The tool ran to an end: `succeeded` or `failed`.
    Completed {
        succeeded: bool,
        result: Option<Value>,
        error: Option<Value>,
        retryable: bool,
        provider_ref: Option<String>,
    },
    /// The caller cannot tell what happened (a timeout).
    Unknown { error: Option<Value> },
}

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReportRefused {
    /// 409 `operation_already_final`: a different report for an operation already settled.
    #[error("the operation already has a final outcome ({status}); nothing was changed")]
    AlreadyFinal { status: OperationStatus },
    /// 409 `lease_lost`: the token is wrong, or the lease ran out.
    #[error("this lease is not (or no longer) the operation's lease; nothing was changed")]
    LeaseLost,
}

/// Decides a report against the stored operation.
pub fn decide_report(
    operation: Operation,
    token: &str,
    report: &Report,
    actor: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, ReportRefused>> {
    let same_lease = operation
        .lease
        .as_ref()
        .is_some_and(|lease| lease.token_hash.matches(token));
    if same_lease && repeats_what_is_stored(&operation, report) {
        return Decision::answer(Ok(operation), Vec::new());
    }
    if matches!(
        operation.status,
        OperationStatus::Succeeded | OperationStatus::Failed | OperationStatus::Rejected
    ) {
        let status = operation.status;
        return Decision::answer(Err(ReportRefused::AlreadyFinal { status }), Vec::new());
    }
    if operation.status != OperationStatus::Pending || !same_lease || !operation.lease_is_live(now)
    {
        return Decision::answer(Err(ReportRefused::LeaseLost), Vec::new());
    }
    let mut after = operation.clone();
    after.updated_at = now;
    let (kind, detail) = match report {
        Report::Completed {
            succeeded,
            result,
            error,
            retryable,
            provider_ref,
        } => {
            let outcome = if *succeeded {
                Outcome::Succeeded
            } else {
                Outcome::Failed
            };
            after.move_by(Transition::Complete(outcome));
            after.result = operation.redact_answer(result.as_ref());
            after.error = operation.redact_answer(error.as_ref());
            after.retryable = !succeeded && *retryable;
            after.provider_ref = provider_ref.clone();
            after.settle_at(now);
            let detail = json!({ "status": after.status, "retryable": after.retryable, "provider_ref": after.provider_ref, "attempt": after.attempt });
            (EventKind::Completed, detail)
        }
        Report::Unknown { error } => {
            after.move_by(Transition::MarkUnknown);
            after.mark_unknown_since(now);
            after.error = operation.redact_answer(error.as_ref());
            (
                EventKind::MarkedUnknown,
                json!({ "error": after.error, "attempt": after.attempt }),
            )
        }
    };
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
            expected_status: operation.status,
        }],
        events: vec![event],
        outcome: Ok(after),
    }
}

/// A retry of the very report that is already stored (a lost response): answered again.
fn repeats_what_is_stored(operation: &Operation, report: &Report) -> bool {
    match report {
        Report::Completed {
            succeeded: true, ..
        } => operation.status == OperationStatus::Succeeded,
        Report::Completed {
            succeeded: false, ..
        } => operation.status == OperationStatus::Failed,
        Report::Unknown { .. } => operation.status == OperationStatus::Unknown,
    }
}
