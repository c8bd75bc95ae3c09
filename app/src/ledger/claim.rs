//! The claim rule: given the live operation of a key (if any) and a new request, decide what
//! to answer and what to write. Pure; the storage runs it inside the transaction that holds
//! the key, so the decision and its writes are atomic.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use super::model::{ClaimRequest, Event, EventKind, Lease, Operation};
use super::notes;
use super::write::{Decision, Write};
use crate::domain::{Fingerprint, OperationStatus};

/// What a claim ends in; the REST layer maps each to the contract's status.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// 201: the caller holds the lease and must now execute the tool.
    Started { operation: Operation, lease: Lease },
    /// 202: a person must approve first.
    AwaitingApproval { operation: Operation },
    /// 200: the stored outcome, and what to tell the model.
    Replayed { operation: Operation, note: String },
    /// 409 `operation_in_progress`.
    InProgress {
        operation: Operation,
        retry_after_seconds: u64,
        note: String,
    },
    /// 409 `operation_outcome_unknown`.
    OutcomeUnknown { operation: Operation, note: String },
    /// 422 `idempotency_key_reused`.
    KeyReused {
        operation: Operation,
        requested: Fingerprint,
    },
}

/// Values a claim may need that are not pure: ids and lease tokens are made by the caller.
#[derive(Debug, Clone)]
pub struct Fresh {
    pub operation_id: Uuid,
    pub lease_token: String,
}

/// Decides a claim. `actor` names the agent for the audit trail.
pub fn decide_claim(
    live: Option<Operation>,
    request: &ClaimRequest,
    actor: &str,
    fresh: Fresh,
    now: DateTime<Utc>,
) -> Decision<Claim> {
    let Some(existing) = live else {
        return create(request, actor, fresh, now, None);
    };
    if ttl_has_ended(&existing, now) {
        return create(request, actor, fresh, now, Some(existing));
    }
    let operation_id = existing.id;
    let event = |kind: EventKind, detail| Event {
        operation_id,
        at: now,
        kind,
        actor: actor.to_owned(),
        detail,
    };
    if existing.fingerprint != request.fingerprint {
        let detail = json!({ "stored_fingerprint": existing.fingerprint, "requested_fingerprint": request.fingerprint });
        let events = vec![event(EventKind::MismatchRejected, detail)];
        let outcome = Claim::KeyReused {
            operation: existing,
            requested: request.fingerprint.clone(),
        };
        return Decision::answer(outcome, events);
    }
    match existing.status {
        OperationStatus::Succeeded | OperationStatus::Rejected => {
            replay(existing, event(EventKind::Replayed, json!({})))
        }
        OperationStatus::Failed if !existing.retryable => {
            replay(existing, event(EventKind::Replayed, json!({})))
        }
        OperationStatus::Failed | OperationStatus::Approved => {
            relet(existing, request, EventKind::Claimed, actor, fresh, now)
        }
        OperationStatus::Pending if existing.lease_is_live(now) => {
            let retry_after_seconds =
                seconds_until(existing.lease.as_ref().map(|l| l.expires_at), now);
            let note = notes::in_progress(&existing, retry_after_seconds);
            let events = vec![event(
                EventKind::InFlightRejected,
                json!({ "attempt": existing.attempt }),
            )];
            Decision::answer(
                Claim::InProgress {
                    operation: existing,
                    retry_after_seconds,
                    note,
                },
                events,
            )
        }
        OperationStatus::Pending if existing.effect.allows_lease_takeover() => relet(
            existing,
            request,
            EventKind::LeaseTakenOver,
            actor,
            fresh,
            now,
        ),
        OperationStatus::Pending => lease_expired(existing, now),
        OperationStatus::Unknown => {
            let note = notes::outcome_unknown(&existing);
            let events = vec![event(EventKind::BlockedUnknown, json!({}))];
            Decision::answer(
                Claim::OutcomeUnknown {
                    operation: existing,
                    note,
                },
                events,
            )
        }
        OperationStatus::AwaitingApproval => {
            let events = vec![event(EventKind::BlockedAwaitingApproval, json!({}))];
            Decision::answer(
                Claim::AwaitingApproval {
                    operation: existing,
                },
                events,
            )
        }
    }
}

/// Whether the key's life is over, so a claim starts a brand-new operation. Operations whose
/// outcome is open (pending, unknown) never end by TTL: they must settle first.
pub fn ttl_has_ended(operation: &Operation, now: DateTime<Utc>) -> bool {
    let settled = !matches!(
        operation.status,
        OperationStatus::Pending | OperationStatus::Unknown
    );
    settled && now >= operation.expires_at
}

fn create(
    request: &ClaimRequest,
    actor: &str,
    fresh: Fresh,
    now: DateTime<Utc>,
    expired: Option<Operation>,
) -> Decision<Claim> {
    let needs_approval = request.policy.needs_approval();
    let lease = Lease {
        token: fresh.lease_token,
        expires_at: now + Duration::seconds(i64::from(request.policy.lease_seconds)),
    };
    let operation = Operation {
        id: fresh.operation_id,
        namespace: request.namespace.clone(),
        key: request.key.clone(),
        key_source: request.key_source,
        tool: request.tool.clone(),
        effect: request.policy.effect,
        fingerprint: request.fingerprint.clone(),
        args: request.args.clone(),
        run_id: request.run_id.clone(),
        step: request.step,
        status: if needs_approval {
            OperationStatus::AwaitingApproval
        } else {
            OperationStatus::Pending
        },
        // Attempts count executions; one waiting for approval has not been attempted yet.
        attempt: if needs_approval { 0 } else { 1 },
        result: None,
        error: None,
        retryable: false,
        provider_ref: None,
        created_at: now,
        updated_at: now,
        completed_at: None,
        expires_at: now + Duration::seconds(i64::from(request.policy.ttl_seconds)),
        approval: None,
        lease: (!needs_approval).then(|| lease.clone()),
    };
    let mut writes = Vec::new();
    let mut events = Vec::new();
    if let Some(old) = expired {
        writes.push(Write::Retire {
            id: old.id,
            at: now,
        });
        events.push(Event {
            operation_id: old.id,
            at: now,
            kind: EventKind::Retired,
            actor: actor.to_owned(),
            detail: json!({ "replaced_by": operation.id, "expired_at": old.expires_at }),
        });
    }
    let kind = if needs_approval {
        EventKind::ApprovalRequested
    } else {
        EventKind::Claimed
    };
    events.push(Event {
        operation_id: operation.id,
        at: now,
        kind,
        actor: actor.to_owned(),
        detail: json!({ "attempt": operation.attempt, "key_source": operation.key_source, "effect": operation.effect }),
    });
    writes.push(Write::Insert(operation.clone()));
    let outcome = if needs_approval {
        Claim::AwaitingApproval { operation }
    } else {
        Claim::Started { operation, lease }
    };
    Decision {
        outcome,
        writes,
        events,
    }
}

fn replay(operation: Operation, event: Event) -> Decision<Claim> {
    let note = notes::replayed(&operation);
    Decision::answer(Claim::Replayed { operation, note }, vec![event])
}

/// A new lease on an existing operation, for the tool's current lease length.
fn relet(
    existing: Operation,
    request: &ClaimRequest,
    kind: EventKind,
    actor: &str,
    fresh: Fresh,
    now: DateTime<Utc>,
) -> Decision<Claim> {
    let lease = Lease {
        token: fresh.lease_token,
        expires_at: now + Duration::seconds(i64::from(request.policy.lease_seconds)),
    };
    let mut after = existing.clone();
    after.status = OperationStatus::Pending;
    after.attempt += 1;
    after.lease = Some(lease.clone());
    after.updated_at = now;
    after.error = None;
    after.retryable = false;
    let event = Event {
        operation_id: after.id,
        at: now,
        kind,
        actor: actor.to_owned(),
        detail: json!({ "attempt": after.attempt, "previous_status": existing.status }),
    };
    Decision {
        writes: vec![Write::Update {
            after: after.clone(),
            expected_status: existing.status,
        }],
        events: vec![event],
        outcome: Claim::Started {
            operation: after,
            lease,
        },
    }
}

fn lease_expired(existing: Operation, now: DateTime<Utc>) -> Decision<Claim> {
    let mut after = existing.clone();
    after.status = OperationStatus::Unknown;
    after.updated_at = now;
    after.error = Some(
        json!({ "code": "lease_expired", "message": "the lease ran out before the outcome was reported" }),
    );
    let event = Event {
        operation_id: after.id,
        at: now,
        kind: EventKind::LeaseExpired,
        actor: "system".into(),
        detail: json!({ "attempt": after.attempt, "lease_expired_at": existing.lease.as_ref().map(|l| l.expires_at) }),
    };
    let note = notes::outcome_unknown(&after);
    Decision {
        writes: vec![Write::Update {
            after: after.clone(),
            expected_status: existing.status,
        }],
        events: vec![event],
        outcome: Claim::OutcomeUnknown {
            operation: after,
            note,
        },
    }
}

fn seconds_until(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> u64 {
    let millis = at.map_or(0, |at| (at - now).num_milliseconds());
    u64::try_from(millis).unwrap_or(0).div_ceil(1000).max(1)
}
