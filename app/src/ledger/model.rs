//! What the ledger stores: operations, their leases and approvals, and audit events.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::domain::{
    redact_answer, sha256_hex, transition, Effect, Fingerprint, IdempotencyKey, KeySource,
    Namespace, OperationStatus, ToolName, ToolPolicy, Transition,
};

/// A person's decision on an operation that waited for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Approval {
    pub decided_by: String,
    pub decided_at: DateTime<Utc>,
    /// `approved` or `rejected`.
    pub decision: String,
    pub reason: Option<String>,
}

/// The right to execute an operation until `expires_at`, proven by `token`: what the claimer
/// is given, once. The ledger keeps only its [`HeldLease`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Lease {
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

impl Lease {
    /// What the ledger stores of this lease: its token's digest, never the token.
    pub fn held(&self) -> HeldLease {
        HeldLease {
            token_hash: LeaseTokenHash::of(&self.token),
            expires_at: self.expires_at,
        }
    }
}

/// A lease as the ledger keeps it. A copy of the database (a backup, a replica, a leaked
/// dump) then holds nothing that would let anyone report an outcome in the claimer's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    pub token_hash: LeaseTokenHash,
    pub expires_at: DateTime<Utc>,
}

/// The SHA-256 digest of a lease token, as 64 lowercase hex digits. A token is 32 random
/// bytes, so a fast hash suffices (as for API keys and session tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseTokenHash(String);

impl LeaseTokenHash {
    /// The digest of a token as the claimer presents it.
    pub fn of(token: &str) -> Self {
        Self(sha256_hex(token))
    }

    /// A digest as stored. Anything else is not a digest the ledger wrote.
    pub fn from_stored(stored: String) -> Option<Self> {
        let is_digest = stored.len() == 64
            && stored
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
        is_digest.then_some(Self(stored))
    }

    /// Whether `token` is the one this digest was made of, compared in constant time so
    /// that the time to refuse tells nothing about how close a guess came.
    pub fn matches(&self, token: &str) -> bool {
        Self::of(token).0.as_bytes().ct_eq(self.0.as_bytes()).into()
    }

    /// The stored text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One intent of an agent and what became of it. Serializes as the contract's `Op`; the
/// lease token is never part of it (only the claimer learns it, once).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema), schema(as = Op))]
pub struct Operation {
    pub id: Uuid,
    pub namespace: Namespace,
    pub key: IdempotencyKey,
    pub key_source: KeySource,
    pub tool: ToolName,
    pub effect: Effect,
    pub fingerprint: Fingerprint,
    /// What idem passes to the tool's provider as its idempotency key, and looks the effect up
    /// by: `idem_` and the operation's id, the same for every attempt of this operation and
    /// different for any other (another namespace, the same key after its TTL). An agent that
    /// runs the tool itself passes this, not its own key, to a provider that deduplicates.
    pub provider_key: String,
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub args: Value,
    pub run_id: Option<String>,
    pub step: Option<u64>,
    pub status: OperationStatus,
    pub attempt: u32,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub retryable: bool,
    pub provider_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
    /// How long the key lives once the operation has settled: the tool's `ttl_seconds` when
    /// the operation was created. Each settlement moves `expires_at` to then plus this.
    #[serde(skip)]
    pub ttl_seconds: u32,
    pub approval: Option<Approval>,
    /// While `awaiting_approval`: when the request lapses and the operation is rejected.
    pub approval_expires_at: Option<DateTime<Utc>>,
    /// Who executes the tool.
    pub runner: Runner,
    /// When the operation (last) became `unknown`; reconciliation latency counts from here.
    pub unknown_since: Option<DateTime<Utc>>,
    /// Failed reconciliation lookups since it became `unknown`; they space out the next ones.
    pub reconcile_attempts: u32,
    /// While `unknown`: when the reconciler may ask the provider again (`None`: now).
    pub next_reconcile_at: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub lease: Option<HeldLease>,
}

/// Who executes an operation's tool once it holds a lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    /// The caller claimed it (`POST /v1/operations`), runs the tool and reports.
    #[default]
    Agent,
    /// The ledger runs the tool's executor itself (`POST /v1/tools/{name}/invoke`).
    Idem,
}

impl Operation {
    /// Moves the status through the state machine's one transition function
    /// ([`crate::domain::transition`], tested as a table). The rules check their preconditions
    /// before they move anything, so a refusal here is a bug in a rule, which its tests catch.
    pub fn move_by(&mut self, event: Transition) {
        self.status = transition(self.status, event).unwrap_or_else(|refused| {
            panic!("a ledger rule decided an impossible transition: {refused}")
        });
    }

    /// Starts the reconciliation clock: the operation became `unknown` at `now`, and the
    /// reconciler may ask the provider right away.
    pub fn mark_unknown_since(&mut self, now: DateTime<Utc>) {
        self.unknown_since = Some(now);
        self.reconcile_attempts = 0;
        self.next_reconcile_at = None;
    }

    /// The operation settled at `now` (an outcome, a failure or a rejection is stored). Its
    /// key's time to live counts from here: an operation that stayed `pending` or `unknown`
    /// past its TTL must not find its key already over the moment it settles, or the next
    /// claim would start the action again instead of replaying the outcome.
    pub fn settle_at(&mut self, now: DateTime<Utc>) {
        self.completed_at = Some(now);
        self.expires_at = now + Duration::seconds(i64::from(self.ttl_seconds));
    }

    /// What a tool answered for this operation (a result or an error) as the ledger stores
    /// it: redacted by the rules its arguments were.
    pub fn redact_answer(&self, answer: Option<&Value>) -> Option<Value> {
        answer.map(|answer| redact_answer(answer, &self.args))
    }

    /// Whether a live lease is held at `now`.
    pub fn lease_is_live(&self, now: DateTime<Utc>) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|lease| lease.expires_at > now)
    }
}

/// What an agent asks for when it begins an operation, already parsed and redacted.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub namespace: Namespace,
    pub key: IdempotencyKey,
    pub key_source: KeySource,
    pub tool: ToolName,
    pub policy: ToolPolicy,
    pub fingerprint: Fingerprint,
    pub args: Value,
    pub run_id: Option<String>,
    pub step: Option<u64>,
    pub runner: Runner,
}

/// Kinds of audit events. State changes are written in the same transaction as the change;
/// the duplicate-prevention kinds change nothing and may be written just after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Claimed,
    ApprovalRequested,
    LeaseTakenOver,
    LeaseExpired,
    Completed,
    MarkedUnknown,
    Retired,
    Approved,
    Rejected,
    ApprovalExpired,
    /// Reconciliation asked the provider and could not get an answer (it will ask again).
    ReconcileAttempted,
    /// Reconciliation settled an `unknown` operation from the provider's answer.
    Reconciled,
    /// A person settled an operation by hand (a manual intervention).
    Resolved,
    /// A person ended the key's life early (a manual intervention).
    Expired,
    Replayed,
    InFlightRejected,
    BlockedUnknown,
    BlockedAwaitingApproval,
    MismatchRejected,
}

impl EventKind {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Claimed => "claimed",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::LeaseTakenOver => "lease_taken_over",
            EventKind::LeaseExpired => "lease_expired",
            EventKind::Completed => "completed",
            EventKind::MarkedUnknown => "marked_unknown",
            EventKind::Retired => "retired",
            EventKind::Approved => "approved",
            EventKind::Rejected => "rejected",
            EventKind::ApprovalExpired => "approval_expired",
            EventKind::ReconcileAttempted => "reconcile_attempted",
            EventKind::Reconciled => "reconciled",
            EventKind::Resolved => "resolved",
            EventKind::Expired => "expired",
            EventKind::Replayed => "replayed",
            EventKind::InFlightRejected => "in_flight_rejected",
            EventKind::BlockedUnknown => "blocked_unknown",
            EventKind::BlockedAwaitingApproval => "blocked_awaiting_approval",
            EventKind::MismatchRejected => "mismatch_rejected",
        }
    }

    /// Duplicates prevented and mismatches change no state (API.md: "may be written in small
    /// batches just after the answer").
    pub fn changes_state(self) -> bool {
        !matches!(
            self,
            EventKind::Replayed
                | EventKind::InFlightRejected
                | EventKind::BlockedUnknown
                | EventKind::BlockedAwaitingApproval
                | EventKind::MismatchRejected
        )
    }
}

/// An entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Event {
    #[serde(skip)]
    pub operation_id: Uuid,
    pub at: DateTime<Utc>,
    pub kind: EventKind,
    /// `agent:<namespace>/<key name>`, `user:<username>` or `system`.
    pub actor: String,
    pub detail: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_keeps_the_digest_and_matches_only_its_token() {
        let lease = Lease {
            token: "tok-1".into(),
            expires_at: Utc::now(),
        };
        let held = lease.held();
        assert_eq!(held.token_hash.as_str(), sha256_hex("tok-1"));
        assert!(held.token_hash.matches("tok-1"));
        assert!(!held.token_hash.matches("tok-2"));
        assert!(!held.token_hash.matches(held.token_hash.as_str()));
    }

    #[test]
    fn only_lowercase_sha256_hex_is_a_stored_digest() {
        let digest = sha256_hex("tok-1");
        assert!(LeaseTokenHash::from_stored(digest.clone()).is_some());
        for stored in [
            "tok-1".to_owned(),
            digest.to_uppercase(),
            digest[..63].to_owned(),
            format!("{digest}0"),
        ] {
            assert!(
                LeaseTokenHash::from_stored(stored.clone()).is_none(),
                "{stored}"
            );
        }
    }
}
