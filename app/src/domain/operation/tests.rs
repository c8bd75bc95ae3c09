//! The state machine as a table: every status against every event.

use super::*;
use OperationStatus::*;
use Transition as T;

const OK: Outcome = Outcome::Succeeded;
const KO: Outcome = Outcome::Failed;

fn takeover(retryable: bool, lease_expired: bool, takeover_allowed: bool) -> Transition {
    T::Takeover {
        retryable,
        lease_expired,
        takeover_allowed,
    }
}

#[test]
fn every_status_meets_every_event_as_the_table_says() {
    const NO: Option<OperationStatus> = None;
    // Columns: awaiting_approval, approved, pending, succeeded, failed, unknown, rejected.
    let table: &[(Transition, [Option<OperationStatus>; 7])] = &[
        (T::Approve, [Some(Approved), NO, NO, NO, NO, NO, NO]),
        (T::Reject, [Some(Rejected), NO, NO, NO, NO, NO, NO]),
        (T::ApprovalExpired, [Some(Rejected), NO, NO, NO, NO, NO, NO]),
        (T::Complete(OK), [NO, NO, Some(Succeeded), NO, NO, NO, NO]),
        (T::Complete(KO), [NO, NO, Some(Failed), NO, NO, NO, NO]),
        (T::MarkUnknown, [NO, NO, Some(Unknown), NO, NO, NO, NO]),
        (
            T::LeaseExpired {
                takeover_allowed: false,
            },
            [NO, NO, Some(Unknown), NO, NO, NO, NO],
        ),
        (
            T::LeaseExpired {
                takeover_allowed: true,
            },
            [NO, NO, Some(Pending), NO, NO, NO, NO],
        ),
        (
            takeover(false, false, false),
            [NO, Some(Pending), NO, NO, NO, NO, NO],
        ),
        (
            takeover(false, false, true),
            [NO, Some(Pending), NO, NO, NO, NO, NO],
        ),
        (
            takeover(false, true, false),
            [NO, Some(Pending), NO, NO, NO, NO, NO],
        ),
        (
            takeover(false, true, true),
            [NO, Some(Pending), Some(Pending), NO, NO, NO, NO],
        ),
        (
            takeover(true, false, false),
            [NO, Some(Pending), NO, NO, Some(Pending), NO, NO],
        ),
        (
            takeover(true, false, true),
            [NO, Some(Pending), NO, NO, Some(Pending), NO, NO],
        ),
        (
            takeover(true, true, false),
            [NO, Some(Pending), NO, NO, Some(Pending), NO, NO],
        ),
        (
            takeover(true, true, true),
            [NO, Some(Pending), Some(Pending), NO, Some(Pending), NO, NO],
        ),
        (
            T::Reconcile { found: true },
            [NO, NO, NO, NO, NO, Some(Succeeded), NO],
        ),
        (
            T::Reconcile { found: false },
            [NO, NO, NO, NO, NO, Some(Failed), NO],
        ),
        (
            T::Resolve(OK),
            [NO, NO, Some(Succeeded), NO, NO, Some(Succeeded), NO],
        ),
        (
            T::Resolve(KO),
            [NO, NO, Some(Failed), NO, NO, Some(Failed), NO],
        ),
        (
            T::Expire,
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
    for (event, row) in table {
        for (from, expected) in OperationStatus::ALL.into_iter().zip(row) {
            let expected = expected.ok_or(InvalidTransition {
                from,
                event: *event,
            });
            assert_eq!(transition(from, *event), expected, "{from} on {event:?}");
        }
    }
}

#[test]
fn refused_transitions_carry_the_api_codes() {
    let table = [
        (Succeeded, T::Complete(OK), "operation_already_final"),
        (Failed, T::Resolve(OK), "operation_already_final"),
        (Rejected, T::Approve, "operation_already_final"),
        (Unknown, T::Complete(OK), "lease_lost"),
        (Approved, T::MarkUnknown, "lease_lost"),
        (Pending, T::Approve, "invalid_transition"),
        (Unknown, T::Expire, "invalid_transition"),
    ];
    for (from, event, code) in table {
        let error = transition(from, event).unwrap_err();
        assert_eq!(error.code(), code, "{from} on {event:?}");
    }
    let message = transition(Unknown, T::Expire).unwrap_err().to_string();
    assert_eq!(message, "cannot expire an operation that is unknown");
}

#[test]
fn a_new_operation_waits_for_approval_only_when_its_tool_needs_it() {
    assert_eq!(OperationStatus::initial(true), AwaitingApproval);
    assert_eq!(OperationStatus::initial(false), Pending);
}

#[test]
fn succeeded_failed_and_rejected_are_the_final_statuses() {
    let finals: Vec<_> = OperationStatus::ALL
        .into_iter()
        .filter(|s| s.is_final())
        .collect();
    assert_eq!(finals, [Succeeded, Failed, Rejected]);
}

#[test]
fn statuses_round_trip_through_their_names_and_json() {
    for status in OperationStatus::ALL {
        assert_eq!(status.as_str().parse::<OperationStatus>(), Ok(status));
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            format!("\"{status}\"")
        );
    }
    assert_eq!("Pending".parse::<OperationStatus>(), Err(StatusParseError));
    assert_eq!(
        serde_json::to_string(&Outcome::Failed).unwrap(),
        "\"failed\""
    );
}
