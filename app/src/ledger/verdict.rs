//! A person's verdict on an operation that waits for approval: approve or reject.
//!
//! The verdict is bound to the operation, and so to its key and fingerprint: an approval can
//! never be used for other arguments. It is used once: the next claim with the same key and
//! fingerprint takes the lease (`approved` → `pending`), and no later claim can.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::model::{Approval, Event, EventKind, Operation};
use super::write::{Decision, Write};
use crate::domain::{OperationStatus, Transition};

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
    /// 409 `approval_expired`: the request lapsed before the verdict; it is now rejected.
    #[error("the request for approval expired at {expired_at}; the operation is rejected")]
    ApprovalExpired { expired_at: DateTime<Utc> },
}

/// Who rejects a request for approval that nobody answered in time.
pub const LAPSE_ACTOR: &str = "idem";
/// The reason given for it.
pub const LAPSE_REASON: &str = "approval expired";

/// Rejects an operation whose request for approval lapsed (a claim or a verdict found it).
pub fn lapse_approval(
    operation: Operation,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, VerdictRefused>> {
    let verdict = Verdict::Reject {
        reason: LAPSE_REASON.to_owned(),
    };
    let mut decision = apply_verdict(operation, &verdict, LAPSE_ACTOR, now);
    for event in &mut decision.events {
        event.kind = EventKind::ApprovalExpired;
        event.actor = "system".into();
    }
    decision
}

/// Decides a verdict by `username` on the stored operation. A verdict that comes after the
/// request lapsed is refused, and the lapse is recorded in its place.
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
    if let Some(expired_at) = operation.approval_expires_at.filter(|at| now >= *at) {
        let mut lapsed = lapse_approval(operation, now);
        lapsed.outcome = Err(VerdictRefused::ApprovalExpired { expired_at });
        return lapsed;
    }
    apply_verdict(operation, verdict, username, now)
}

/// Records the verdict: `approved` (used by the next claim) or `rejected` (final).
fn apply_verdict(
    operation: Operation,
    verdict: &Verdict,
    username: &str,
    now: DateTime<Utc>,
) -> Decision<Result<Operation, VerdictRefused>> {
    let (event, decision, reason, kind) = match verdict {
        Verdict::Approve { reason } => (
            Transition::Approve,
            "approved",
            reason.clone(),
            EventKind::Approved,
        ),
        Verdict::Reject { reason } => (
            Transition::Reject,
            "rejected",
            Some(reason.clone()),
            EventKind::Rejected,
        ),
    };
    let mut after = operation.clone();
    after.move_by(event);
    after.updated_at = now;
    if after.status == OperationStatus::Rejected {
        after.settle_at(now);
    }
    after.approval_expires_at = None;
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
