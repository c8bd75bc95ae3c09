//! What to tell the model when idem answers instead of the tool: a sentence that says the
//! action happened once (or is unsettled) and that no new action was taken.

use chrono::{DateTime, SecondsFormat, Utc};

use super::model::Operation;
use crate::domain::OperationStatus;

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn at_step(operation: &Operation) -> String {
    match operation.step {
        Some(step) => format!(" at step {step}"),
        None => String::new(),
    }
}

fn error_code(operation: &Operation) -> Option<&str> {
    operation.error.as_ref()?.get("code")?.as_str()
}

/// The note of a replayed final outcome.
pub fn replayed(operation: &Operation) -> String {
    let when = time(operation.completed_at.unwrap_or(operation.updated_at));
    let step = at_step(operation);
    match operation.status {
        OperationStatus::Rejected => {
            let approval = operation.approval.as_ref();
            let who = approval.map_or("an approver", |a| a.decided_by.as_str());
            let reason = approval
                .and_then(|a| a.reason.as_deref())
                .unwrap_or("no reason given");
            format!("rejected by {who} at {when}: {reason}; no action was taken and none will be")
        }
        OperationStatus::Failed => {
            let code = error_code(operation)
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            // The contract's sentence first, as for a success, then what the outcome was.
            format!("already completed{step} at {when}; no new action taken; it failed permanently{code}, and retrying with the same key returns the same failure")
        }
        _ => format!("already completed{step} at {when}; no new action taken"),
    }
}

/// The note of a duplicate that arrived while the first attempt runs.
pub fn in_progress(operation: &Operation, retry_after_seconds: u64) -> String {
    let step = at_step(operation);
    let since = time(operation.updated_at);
    format!(
        "already in progress{step} since {since} (attempt {}); no new action taken; ask again in {retry_after_seconds} s",
        operation.attempt
    )
}

/// The note of an operation whose outcome nobody knows yet.
pub fn outcome_unknown(operation: &Operation) -> String {
    let step = at_step(operation);
    let since = time(operation.updated_at);
    format!("the outcome of the first attempt{step} is unknown since {since}; no new action taken; do not retry: reconciliation or an operator will settle it")
}
