//! The settlement rules as tables: what each settlement does to each status.

use chrono::{Duration, Utc};
use serde_json::json;

use super::*;
use crate::ledger::fixtures::{fresh, refund_request};
use crate::ledger::{decide_claim, Claim};

fn operation(status: OperationStatus) -> Operation {
    let started = decide_claim(
        None,
        &refund_request(),
        "a",
        fresh(),
        Utc::now() - Duration::minutes(5),
    );
    let Claim::Started { mut operation, .. } = started.outcome else {
        panic!("a new key starts");
    };
    operation.status = status;
    if status == OperationStatus::Unknown {
        operation.mark_unknown_since(Utc::now() - Duration::seconds(90));
    }
    operation
}

fn found() -> Settlement {
    Settlement::Reconcile(Ok(Lookup::Found {
        result: json!({ "refund_id": "re_1" }),
        provider_ref: Some("re_1".into()),
    }))
}

fn resolution(outcome: Outcome) -> Settlement {
    Settlement::Resolve(Resolution {
        outcome,
        result: Some(json!({ "by": "hand" })),
        error: None,
        retryable: false,
        reason: "checked the provider's dashboard".into(),
    })
}

fn expiry() -> Settlement {
    Settlement::Expire {
        reason: "start over".into(),
    }
}

/// The status each settlement leaves, from each status (`None`: refused, nothing written).
#[test]
fn every_settlement_meets_every_status_as_the_table_says() {
    use OperationStatus::*;
    const NO: Option<OperationStatus> = None;
    // Columns: awaiting_approval, approved, pending, succeeded, failed, unknown, rejected.
    let table: Vec<(&str, Settlement, [Option<OperationStatus>; 7])> = vec![
        ("found", found(), [NO, NO, NO, NO, NO, Some(Succeeded), NO]),
        (
            "not found",
            Settlement::Reconcile(Ok(Lookup::NotFound)),
            [NO, NO, NO, NO, NO, Some(Failed), NO],
        ),
        (
            "resolve succeeded",
            resolution(Outcome::Succeeded),
            [NO, NO, Some(Succeeded), NO, NO, Some(Succeeded), NO],
        ),
        (
            "resolve failed",
            resolution(Outcome::Failed),
            [NO, NO, Some(Failed), NO, NO, Some(Failed), NO],
        ),
        (
            "expire",
            expiry(),
            [
                Some(AwaitingApproval),
                Some(Approved),
                NO,
                Some(Succeeded),
                Some(Failed),
                NO,
                Some(Rejected),
            ],
        ),
    ];
    let now = Utc::now();
    for (name, settlement, expected) in table {
        for (from, want) in OperationStatus::ALL.into_iter().zip(expected) {
            let decision = decide_settlement(operation(from), &settlement, "user:olga", now);
            match want {
                Some(to) => {
                    let after = decision.outcome.expect(name);
                    assert_eq!(after.status, to, "{name} from {from}");
                    assert_eq!(decision.writes.len(), 1, "{name} from {from}");
                    assert_eq!(decision.events.len(), 1, "{name} from {from}");
                    assert_eq!(decision.events[0].actor, "user:olga");
                }
                None => {
                    assert!(decision.outcome.is_err(), "{name} from {from} is refused");
                    assert!(
                        decision.writes.is_empty(),
                        "{name} from {from} writes nothing"
                    );
                    assert!(
                        decision.events.is_empty(),
                        "{name} from {from} records nothing"
                    );
                }
            }
        }
    }
}

#[test]
fn a_found_key_stores_the_providers_result_and_how_long_it_was_unknown() {
    let now = Utc::now();
    let decision = decide_settlement(operation(OperationStatus::Unknown), &found(), "system", now);
    let after = decision.outcome.unwrap();
    assert_eq!(after.result, Some(json!({ "refund_id": "re_1" })));
    assert_eq!(after.provider_ref.as_deref(), Some("re_1"));
    assert_eq!(after.completed_at, Some(now));
    assert!(after.lease.is_none());
    let event = &decision.events[0];
    assert_eq!(event.kind, EventKind::Reconciled);
    assert_eq!(event.detail["found"], true);
    let unknown_for = event.detail["unknown_for_ms"].as_i64().unwrap();
    assert!((89_000..=91_000).contains(&unknown_for), "{unknown_for}");
}

#[test]
fn a_key_the_provider_never_saw_fails_retryably() {
    let settlement = Settlement::Reconcile(Ok(Lookup::NotFound));
    let decision = decide_settlement(
        operation(OperationStatus::Unknown),
        &settlement,
        "system",
        Utc::now(),
    );
    let after = decision.outcome.unwrap();
    assert_eq!(after.status, OperationStatus::Failed);
    assert!(
        after.retryable,
        "the call never took effect: a retry may run it"
    );
    assert_eq!(after.error.unwrap()["code"], "not_found_by_provider");
}

#[test]
fn failed_lookups_back_off_and_leave_the_operation_unknown_and_its_age_alone() {
    let now = Utc::now();
    let mut stored = operation(OperationStatus::Unknown);
    let updated_at = stored.updated_at;
    let mut waits = Vec::new();
    for _ in 0..7 {
        let settlement = Settlement::Reconcile(Err(LookupError("503 from provider".into())));
        let decision = decide_settlement(stored.clone(), &settlement, "system", now);
        let Err(SettleRefused::ProviderUnavailable {
            next_attempt_at, ..
        }) = decision.outcome
        else {
            panic!("a failed lookup is reported");
        };
        assert_eq!(decision.events[0].kind, EventKind::ReconcileAttempted);
        let Write::Update { after, .. } = &decision.writes[0] else {
            panic!("the attempt is recorded");
        };
        assert_eq!(after.status, OperationStatus::Unknown);
        assert_eq!(
            after.updated_at, updated_at,
            "a stuck operation stays stuck"
        );
        assert_eq!(after.next_reconcile_at, Some(next_attempt_at));
        waits.push((next_attempt_at - now).num_seconds());
        stored = after.clone();
    }
    assert_eq!(waits, [5, 30, 120, 600, 3600, 3600, 3600]);
}

#[test]
fn a_late_executor_answer_settles_an_unknown_operation() {
    let now = Utc::now();
    let failed = Settlement::LateExecution(Execution::Failed {
        error: json!({ "code": "provider_rejected" }),
        retryable: false,
    });
    let decision = decide_settlement(operation(OperationStatus::Unknown), &failed, "x", now);
    let after = decision.outcome.unwrap();
    assert_eq!(after.status, OperationStatus::Failed);
    assert!(!after.retryable);
    assert_eq!(after.error.unwrap()["code"], "provider_rejected");

    let unknown = Settlement::LateExecution(Execution::Unknown { error: json!({}) });
    let decision = decide_settlement(operation(OperationStatus::Unknown), &unknown, "x", now);
    assert_eq!(decision.outcome.unwrap().status, OperationStatus::Unknown);
    assert!(decision.writes.is_empty());
}

#[test]
fn expiry_ends_the_keys_life_now_and_says_why() {
    let now = Utc::now();
    let decision = decide_settlement(operation(OperationStatus::Succeeded), &expiry(), "u", now);
    let after = decision.outcome.unwrap();
    assert_eq!(after.expires_at, now);
    assert_eq!(decision.events[0].kind, EventKind::Expired);
    assert_eq!(decision.events[0].detail["reason"], "start over");
}
