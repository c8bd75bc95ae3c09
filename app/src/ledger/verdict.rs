//! A person's verdict on an operation that waits for approval: approve or reject.
//!
//! The verdict is bound to the operation, and so to its key and fingerprint: an approval can
//! never be used for other arguments. It is used once: the next claim with the same key and
//! fingerprint takes the lease (`approved` → `pending`), and no later claim can.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::model::{Approval, Event, EventKind, Operation};
use super::write::{Decision, Write};
use crate::domain::OperationStatus;

/// What a person decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approve { reason: Option<String> },
    Reject { reason: String },
}

/// Why a verdict was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerdictRefused {
    /// 409 `operation_not_awaiting_approval`.
    #[error("the operation is {status}, not awaiting approval; nothing was changed")]
    NotAwaitingApproval { status: OperationStatus },
}

/// Decides a verdict by `username` on the stored operation.
pub fn decide_verdict(
    operation: Operation,
    verdict: &Verdict,
    username: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, VerdictRefused>> {
    if operation.status != OperationStatus::AwaitingApproval {
        let status = operation.status;
        return Decision::answer(
            Err(VerdictRefused::NotAwaitingApproval { status }),
            Vec::new(),
        );
    }
    let (status, decision, reason, kind) = match verdict {
        Verdict::Approve { reason } => (
            OperationStatus::Approved,
            "approved",
            reason.clone(),
            EventKind::Approved,
        ),
        Verdict::Reject { reason } => (
            OperationStatus::Rejected,
            "rejected",
            Some(reason.clone()),
            EventKind::Rejected,
        ),
    };
    let mut after = operation.clone();
    after.status = status;
    after.updated_at = now;
    if status == OperationStatus::Rejected {
        after.completed_at = Some(now);
    }
    after.approval = Some(Approval {
        decided_by: username.to_owned(),
        decided_at: now,
        decision: decision.to_owned(),
        reason: reason.clone(),
    });
    let event = Event {
        operation_id: after.id,
        at: now,
        kind,
        actor: format!("user:{username}"),
        detail: json!({ "reason": reason, "fingerprint": after.fingerprint }),
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
