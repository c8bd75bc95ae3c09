//! The claim rule: given the live operation of a key (if any) and a new request, decide what
//! to answer and what to write. Pure; the storage runs it inside the transaction that holds
//! the key, so the decision and its writes are atomic.

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use super::model::{ClaimRequest, Event, EventKind, Lease, Operation};
use super::notes;
use super::verdict::lapse_approval;
use super::write::{Decision, Write};
use crate::domain::{Fingerprint, OperationStatus, Transition};

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

impl Claim {
    /// The operation the answer is about.
    pub fn operation(&self) -> &Operation {
        match self {
            Claim::Started { operation, .. }
            | Claim::AwaitingApproval { operation }
            | Claim::Replayed { operation, .. }
            | Claim::InProgress { operation, .. }
            | Claim::OutcomeUnknown { operation, .. }
            | Claim::KeyReused { operation, .. } => operation,
        }
    }
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
        // The retry found the lease run out: the operation becomes `unknown`, and this retry
        // is blocked like any retry of an unknown operation (a duplicate prevented).
        OperationStatus::Pending => {
            let mut expired = lease_expired(existing, now);
            expired
                .events
                .push(event(EventKind::BlockedUnknown, json!({})));
            expired
        }
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
        OperationStatus::AwaitingApproval if approval_has_lapsed(&existing, now) => {
            let lapsed = lapse_approval(existing, now);
            let note =
                notes::replayed(lapsed.outcome.as_ref().expect("a waiting operation lapses"));
            let operation = lapsed.outcome.expect("a waiting operation lapses");
            // The retry gets the stored rejection: a replay, recorded as every replay is.
            let mut events = lapsed.events;
            events.push(event(EventKind::Replayed, json!({})));
            Decision {
                outcome: Claim::Replayed { operation, note },
                writes: lapsed.writes,
                events,
            }
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

/// Whether a request for approval has lapsed unanswered.
pub fn approval_has_lapsed(operation: &Operation, now: DateTime<Utc>) -> bool {
    operation.status == OperationStatus::AwaitingApproval
        && operation.approval_expires_at.is_some_and(|at| now >= at)
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

/// The provider key of a new operation: its own id, so no other operation ever shares it.
pub fn provider_key_of(operation_id: Uuid) -> String {
    format!("idem_{operation_id}")
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
        provider_key: provider_key_of(fresh.operation_id),
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
        ttl_seconds: request.policy.ttl_seconds,
        approval: None,
        approval_expires_at: needs_approval
            .then(|| now + Duration::seconds(i64::from(request.policy.approval_ttl_seconds))),
        lease: (!needs_approval).then(|| lease.held()),
        runner: request.runner,
        unknown_since: None,
        reconcile_attempts: 0,
        next_reconcile_at: None,
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
    after.move_by(Transition::Takeover {
        retryable: existing.retryable,
        lease_expired: !existing.lease_is_live(now),
        takeover_allowed: existing.effect.allows_lease_takeover(),
    });
    after.attempt += 1;
    after.lease = Some(lease.held());
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
    let at = now;
    let expired = expire_lease_at(existing, at);
    let after = expired.outcome;
    let note = notes::outcome_unknown(&after);
    Decision {
        writes: expired.writes,
        events: expired.events,
        outcome: Claim::OutcomeUnknown {
            operation: after,
            note,
        },
    }
}

/// A lease ran out with no report, on a tool whose calls must not be repeated: nobody knows
/// whether the effect happened, so the operation becomes `unknown`. Used by claims that find
/// it and by the lease reaper, at the store's time `now`.
pub fn expire_lease_at(existing: Operation, now: DateTime<Utc>) -> Decision<Operation> {
    let mut after = existing.clone();
    after.move_by(Transition::LeaseExpired {
        takeover_allowed: existing.effect.allows_lease_takeover(),
    });
    after.updated_at = now;
    if after.status == OperationStatus::Unknown {
        after.mark_unknown_since(now);
    }
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
    Decision {
        writes: vec![Write::Update {
            after: after.clone(),
            expected_status: existing.status,
        }],
        events: vec![event],
        outcome: after,
    }
}

fn seconds_until(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> u64 {
    let millis = at.map_or(0, |at| (at - now).num_milliseconds());
    u64::try_from(millis).unwrap_or(0).div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::fixtures::{fresh, refund_request as request};
    use crate::ledger::Approval;

    fn existing(status: OperationStatus, now: DateTime<Utc>) -> Operation {
        let started = decide_claim(None, &request(), "a", fresh(), now - Duration::seconds(10));
        let Claim::Started { mut operation, .. } = started.outcome else {
            panic!("a new key starts");
        };
        operation.status = status;
        operation
    }

    /// What each stored status answers to a claim with the same fingerprint, inside the TTL
    /// and (for `pending`) inside the lease.
    #[test]
    fn every_status_answers_as_the_claim_table_says() {
        let now = Utc::now();
        let cases: [(OperationStatus, bool, &str, usize, Option<EventKind>); 8] = [
            (
                OperationStatus::Succeeded,
                false,
                "replayed",
                0,
                Some(EventKind::Replayed),
            ),
            (
                OperationStatus::Rejected,
                false,
                "replayed",
                0,
                Some(EventKind::Replayed),
            ),
            (
                OperationStatus::Failed,
                false,
                "replayed",
                0,
                Some(EventKind::Replayed),
            ),
            (
                OperationStatus::Failed,
                true,
                "started",
                1,
                Some(EventKind::Claimed),
            ),
            (
                OperationStatus::Approved,
                false,
                "started",
                1,
                Some(EventKind::Claimed),
            ),
            (
                OperationStatus::Pending,
                false,
                "in_progress",
                0,
                Some(EventKind::InFlightRejected),
            ),
            (
                OperationStatus::Unknown,
                false,
                "unknown",
                0,
                Some(EventKind::BlockedUnknown),
            ),
            (
                OperationStatus::AwaitingApproval,
                false,
                "awaiting",
                0,
                Some(EventKind::BlockedAwaitingApproval),
            ),
        ];
        for (status, retryable, expected, writes, event) in cases {
            let mut stored = existing(status, now);
            stored.retryable = retryable;
            let decision = decide_claim(Some(stored.clone()), &request(), "a", fresh(), now);
            let answer = match &decision.outcome {
                Claim::Replayed { .. } => "replayed",
                Claim::Started { operation, lease } => {
                    assert_eq!(operation.attempt, stored.attempt + 1, "{status:?}");
                    assert_eq!(lease.token, "new-token");
                    "started"
                }
                Claim::InProgress { .. } => "in_progress",
                Claim::OutcomeUnknown { .. } => "unknown",
                Claim::AwaitingApproval { .. } => "awaiting",
                Claim::KeyReused { .. } => "reused",
            };
            assert_eq!(answer, expected, "{status:?} retryable={retryable}");
            assert_eq!(decision.writes.len(), writes, "{status:?}");
            assert_eq!(decision.events.first().map(|e| e.kind), event, "{status:?}");
        }
    }

    #[test]
    fn other_arguments_are_refused_whatever_the_status() {
        let now = Utc::now();
        for status in OperationStatus::ALL {
            let mut stored = existing(status, now);
            stored.fingerprint = Fingerprint::compute(&request().tool, &json!({ "other": 1 }), &[]);
            let decision = decide_claim(Some(stored), &request(), "a", fresh(), now);
            assert!(
                matches!(decision.outcome, Claim::KeyReused { .. }),
                "{status:?}"
            );
            assert!(decision.writes.is_empty());
        }
    }

    #[test]
    fn a_rejection_is_replayed_with_who_said_no_and_why() {
        let now = Utc::now();
        let mut stored = existing(OperationStatus::Rejected, now);
        stored.approval = Some(Approval {
            decided_by: "ada".into(),
            decided_at: now,
            decision: "rejected".into(),
            reason: Some("amount too high".into()),
        });
        let Claim::Replayed { note, .. } =
            decide_claim(Some(stored), &request(), "a", fresh(), now).outcome
        else {
            panic!("a rejection is replayed");
        };
        assert!(
            note.starts_with("rejected by ada at ") && note.contains("amount too high"),
            "{note}"
        );
    }

    #[test]
    fn lease_expiry_makes_unknown_or_hands_over_by_effect() {
        let now = Utc::now();
        let mut stored = existing(OperationStatus::Pending, now);
        stored.lease.as_mut().unwrap().expires_at = now - Duration::seconds(1);
        let decision = decide_claim(Some(stored.clone()), &request(), "a", fresh(), now);
        assert!(
            matches!(decision.outcome, Claim::OutcomeUnknown { ref operation, .. } if operation.status == OperationStatus::Unknown)
        );
        // The lapse, and this retry blocked like any retry of an unknown operation.
        let kinds: Vec<_> = decision.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::LeaseExpired, EventKind::BlockedUnknown]);

        stored.effect = crate::domain::Effect::IdempotentWrite;
        let decision = decide_claim(Some(stored), &request(), "a", fresh(), now);
        assert!(
            matches!(decision.outcome, Claim::Started { ref operation, .. } if operation.attempt == 2)
        );
        assert_eq!(decision.events[0].kind, EventKind::LeaseTakenOver);
    }

    #[test]
    fn the_ttl_ends_settled_operations_only() {
        let now = Utc::now();
        for status in OperationStatus::ALL {
            let mut stored = existing(status, now);
            stored.expires_at = now - Duration::seconds(1);
            let settled = !matches!(status, OperationStatus::Pending | OperationStatus::Unknown);
            assert_eq!(ttl_has_ended(&stored, now), settled, "{status:?}");
            if settled {
                let decision = decide_claim(Some(stored.clone()), &request(), "a", fresh(), now);
                assert!(matches!(decision.writes[0], Write::Retire { id, .. } if id == stored.id));
                assert!(
                    matches!(decision.outcome, Claim::Started { ref operation, .. } if operation.id != stored.id)
                );
            }
        }
    }

    /// API.md: pending and unknown operations "must settle first, then the TTL counts". One
    /// that settles long after its creation lives a whole TTL from its settlement, so the
    /// retry right after is a replay, not a second action.
    #[test]
    fn the_ttl_counts_from_when_the_operation_settles() {
        use crate::ledger::complete::{decide_report, Report};
        let created = Utc::now() - Duration::days(3);
        let started = decide_claim(None, &request(), "a", fresh(), created);
        let Claim::Started { operation, .. } = started.outcome else {
            panic!("a new key starts");
        };
        let ttl = Duration::seconds(i64::from(request().policy.ttl_seconds));
        assert_eq!(operation.expires_at, created + ttl);

        // Three days on (past its first TTL), the agent reports success under a live lease.
        let mut late = operation;
        let settled_at = created + Duration::days(3);
        late.lease.as_mut().unwrap().expires_at = settled_at + Duration::seconds(30);
        let report = Report::Completed {
            succeeded: true,
            result: None,
            error: None,
            retryable: false,
            provider_ref: None,
        };
        let settled = decide_report(late, "new-token", &report, "a", settled_at)
            .outcome
            .unwrap();
        assert_eq!(settled.completed_at, Some(settled_at));
        assert_eq!(settled.expires_at, settled_at + ttl);

        let retry = decide_claim(Some(settled.clone()), &request(), "a", fresh(), settled_at);
        assert!(matches!(retry.outcome, Claim::Replayed { .. }));
        let after_its_ttl = settled_at + ttl;
        let retry = decide_claim(Some(settled), &request(), "a", fresh(), after_its_ttl);
        assert!(matches!(retry.outcome, Claim::Started { .. }));
    }

    #[test]
    fn a_retry_that_finds_its_approval_lapsed_is_a_replay_of_the_rejection() {
        let now = Utc::now();
        let mut waiting = existing(OperationStatus::AwaitingApproval, now);
        waiting.approval_expires_at = Some(now - Duration::seconds(1));
        let decision = decide_claim(Some(waiting), &request(), "a", fresh(), now);
        let Claim::Replayed { operation, .. } = decision.outcome else {
            panic!("a lapsed approval is replayed as a rejection");
        };
        assert_eq!(operation.status, OperationStatus::Rejected);
        assert_eq!(
            decision.events.last().map(|e| e.kind),
            Some(EventKind::Replayed)
        );
    }

    /// API.md gives one note for every final outcome replayed: "already completed at step 4
    /// at <time>; no new action taken". A permanent failure says so after it.
    #[test]
    fn a_permanent_failure_is_replayed_with_the_contract_note_then_its_code() {
        let now = Utc::now();
        let mut stored = existing(OperationStatus::Failed, now);
        stored.completed_at = Some(now);
        stored.error = Some(json!({ "code": "card_declined", "message": "declined" }));
        let Claim::Replayed { note, .. } =
            decide_claim(Some(stored), &request(), "a", fresh(), now).outcome
        else {
            panic!("a permanent failure is replayed");
        };
        assert!(
            note.starts_with("already completed at step 4 at ")
                && note.contains("; no new action taken; it failed permanently (card_declined)"),
            "{note}"
        );
    }

    #[test]
    fn a_tool_that_needs_approval_starts_waiting_with_no_attempt_yet() {
        let mut waiting = request();
        waiting.policy.effect = crate::domain::Effect::Irreversible;
        let decision = decide_claim(None, &waiting, "a", fresh(), Utc::now());
        let Claim::AwaitingApproval { operation } = decision.outcome else {
            panic!("irreversible tools wait");
        };
        assert_eq!(operation.attempt, 0);
        assert!(operation.lease.is_none());
        assert_eq!(decision.events[0].kind, EventKind::ApprovalRequested);
    }
}
