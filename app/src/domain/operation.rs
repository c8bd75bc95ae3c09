//! The life of an operation: its status, and the one function that moves it.
//!
//! ```text
//! new key           ─────────────────────────────► pending, or awaiting_approval if the tool
//!                                                   needs approval
//! awaiting_approval ─approve──────────────────────► approved
//! awaiting_approval ─reject, approval expired─────► rejected
//! approved          ─takeover─────────────────────► pending
//! pending           ─complete─────────────────────► succeeded | failed
//! pending           ─mark unknown─────────────────► unknown
//! pending           ─lease expired────────────────► unknown, or pending if the tool allows takeover
//! pending           ─takeover (lease expired, tool allows it)──► pending
//! failed            ─takeover (retryable)─────────► pending
//! unknown           ─reconcile────────────────────► succeeded (found) | failed (not found)
//! pending | unknown ─resolve (a person)───────────► succeeded | failed
//! any but pending and unknown ─expire─────────────► the same status; the key's life ends
//! ```
//!
//! `succeeded`, `failed` and `rejected` are final: a claim with the same key replays them. A
//! `failed` operation whose error was `retryable` is final all the same (it is replayed, and it
//! never expires early), but the next claim may re-lease it: that is [`Transition::Takeover`]
//! with `retryable: true`, the only way out of a final status. `retryable` is a field of the
//! operation beside its status, so the caller passes it in.
//!
//! Manual expiry ([`Transition::Expire`]) ends the key's life (the store sets `expires_at`) and
//! leaves the status as it is. It is refused for `pending` and `unknown`, which must settle first,
//! exactly as they never expire by TTL: otherwise a new claim could run the action a second time
//! while the first may still be running or may already have happened.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where an operation stands (the `status` of an Op).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Waits for a person to approve or reject it.
    AwaitingApproval,
    /// Approved; the next claim leases it.
    Approved,
    /// A caller holds the lease and is running the tool.
    Pending,
    /// Done, and the result is stored.
    Succeeded,
    /// Did not happen (or failed); retried only if the error was `retryable`.
    Failed,
    /// Nobody knows whether it happened; reconciliation or a person decides.
    Unknown,
    /// A person said no, or nobody said yes in time.
    Rejected,
}

impl OperationStatus {
    /// Every status, in the order of the API.
    pub const ALL: [OperationStatus; 7] = [
        Self::AwaitingApproval,
        Self::Approved,
        Self::Pending,
        Self::Succeeded,
        Self::Failed,
        Self::Unknown,
        Self::Rejected,
    ];

    /// The status of a brand-new operation: it waits for a person if its tool needs approval.
    pub fn initial(needs_approval: bool) -> Self {
        if needs_approval {
            Self::AwaitingApproval
        } else {
            Self::Pending
        }
    }

    /// The status's name as it appears in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingApproval => "awaiting_approval",
            Self::Approved => "approved",
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::Rejected => "rejected",
        }
    }

    /// Whether the outcome is settled, so a claim with the same key replays it. A retryable
    /// `failed` is final too; see the module documentation.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Rejected)
    }
}

/// A status name that is not one of the API's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("status must be one of awaiting_approval, approved, pending, succeeded, failed, unknown, rejected")]
pub struct StatusParseError;

impl FromStr for OperationStatus {
    type Err = StatusParseError;
    fn from_str(value: &str) -> Result<Self, StatusParseError> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == value)
            .ok_or(StatusParseError)
    }
}

impl fmt::Display for OperationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt ended, as a caller or a person reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It happened.
    Succeeded,
    /// It did not happen, or went wrong.
    Failed,
}

impl From<Outcome> for OperationStatus {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Succeeded => Self::Succeeded,
            Outcome::Failed => Self::Failed,
        }
    }
}

/// Something that happens to an existing operation. A new one starts at
/// [`OperationStatus::initial`]; a claim after expiry starts a new one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// A person approves it.
    Approve,
    /// A person rejects it.
    Reject,
    /// Nobody decided in time; it ends as `rejected`.
    ApprovalExpired,
    /// The lease holder reports the outcome.
    Complete(Outcome),
    /// The lease holder cannot tell what happened (a timeout).
    MarkUnknown,
    /// The lease ran out without a completion. If the tool allows takeover the operation stays
    /// `pending` for the next claim to take over; otherwise it becomes `unknown`.
    LeaseExpired {
        /// The tool's effect makes running it again harmless.
        takeover_allowed: bool,
    },
    /// A claim takes a new lease (`attempt` + 1): on an approved operation, a retryable
    /// failure, or a pending one whose lease ran out when the tool allows takeover.
    Takeover {
        /// The operation's stored `retryable` flag.
        retryable: bool,
        /// The operation's lease has run out.
        lease_expired: bool,
        /// The tool's effect makes running it again harmless.
        takeover_allowed: bool,
    },
    /// The provider answered whether it saw the key: `succeeded` if it did, else `failed` (which
    /// the caller stores as retryable, since the provider never saw it).
    Reconcile {
        /// The provider saw the key.
        found: bool,
    },
    /// A person settles it by hand.
    Resolve(Outcome),
    /// A person ends the key's life now; the status stays.
    Expire,
}

impl Transition {
    /// A short name for messages and audit events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Reject => "reject",
            Self::ApprovalExpired => "approval_expired",
            Self::Complete(_) => "complete",
            Self::MarkUnknown => "mark_unknown",
            Self::LeaseExpired { .. } => "lease_expired",
            Self::Takeover { .. } => "takeover",
            Self::Reconcile { .. } => "reconcile",
            Self::Resolve(_) => "resolve",
            Self::Expire => "expire",
        }
    }
}

/// A transition the operation's status does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot {} an operation that is {from}", .event.as_str())]
pub struct InvalidTransition {
    /// The status the operation is in.
    pub from: OperationStatus,
    /// What was attempted.
    pub event: Transition,
}

impl InvalidTransition {
    /// The API's error code: `operation_already_final` on a final operation, `lease_lost` for a
    /// completion of one that no longer runs under that lease, else `invalid_transition`.
    pub fn code(&self) -> &'static str {
        if self.from.is_final() {
            "operation_already_final"
        } else if matches!(
            self.event,
            Transition::Complete(_) | Transition::MarkUnknown
        ) {
            "lease_lost"
        } else {
            "invalid_transition"
        }
    }
}

/// The status an operation in `from` moves to on `event`, or why it cannot.
pub fn transition(
    from: OperationStatus,
    event: Transition,
) -> Result<OperationStatus, InvalidTransition> {
    use OperationStatus::*;
    use Transition as T;
    let to = match (from, event) {
        (AwaitingApproval, T::Approve) => Approved,
        (AwaitingApproval, T::Reject | T::ApprovalExpired) => Rejected,
        (Pending, T::Complete(outcome) | T::Resolve(outcome)) => outcome.into(),
        (Pending, T::MarkUnknown) => Unknown,
        (Pending, T::LeaseExpired { takeover_allowed }) => {
            if takeover_allowed {
                Pending
            } else {
                Unknown
            }
        }
        (Approved, T::Takeover { .. }) => Pending,
        (
            Failed,
            T::Takeover {
                retryable: true, ..
            },
        ) => Pending,
        (
            Pending,
            T::Takeover {
                lease_expired: true,
                takeover_allowed: true,
                ..
            },
        ) => Pending,
        (Unknown, T::Reconcile { found: true }) => Succeeded,
        (Unknown, T::Reconcile { found: false }) => Failed,
        (Unknown, T::Resolve(outcome)) => outcome.into(),
        (AwaitingApproval | Approved | Succeeded | Failed | Rejected, T::Expire) => from,
        _ => return Err(InvalidTransition { from, event }),
    };
    Ok(to)
}

#[cfg(test)]
mod tests;
