//! What each decision adds to the table by tool (`GET /v1/metrics/tools`): one tick per
//! counted event, by minute, namespace, tool and measure. The store adds the ticks up as
//! decisions commit, so that no read has to count a window's events again.

use crate::domain::OperationStatus;
use crate::ledger::{Event, EventKind, Operation};

use super::window::unix_minute;

/// A column of the table by tool that counts events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ToolMeasure {
    /// An operation created: its first `claimed` or `approval_requested`.
    Operations,
    /// A repeat answered without a new action: `replayed`, `in_flight_rejected`,
    /// `blocked_unknown`, `blocked_awaiting_approval`.
    DuplicatesPrevented,
    /// A settlement (`completed`, `reconciled`, `resolved`) that left its operation `failed`.
    Failures,
}

impl ToolMeasure {
    pub const ALL: [ToolMeasure; 3] = [
        ToolMeasure::Operations,
        ToolMeasure::DuplicatesPrevented,
        ToolMeasure::Failures,
    ];

    /// The name the store keeps it under.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMeasure::Operations => "operations",
            ToolMeasure::DuplicatesPrevented => "duplicates_prevented",
            ToolMeasure::Failures => "failures",
        }
    }

    /// The measure stored as `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|measure| measure.as_str() == name)
    }

    /// What `event` of `operation` (as the decision left it) adds to, if anything.
    pub fn of(event: &Event, operation: &Operation) -> Option<Self> {
        match event.kind {
            EventKind::Claimed | EventKind::ApprovalRequested
                if event.at == operation.created_at =>
            {
                Some(ToolMeasure::Operations)
            }
            EventKind::Replayed
            | EventKind::InFlightRejected
            | EventKind::BlockedUnknown
            | EventKind::BlockedAwaitingApproval => Some(ToolMeasure::DuplicatesPrevented),
            EventKind::Completed | EventKind::Reconciled | EventKind::Resolved
                if operation.status == OperationStatus::Failed =>
            {
                Some(ToolMeasure::Failures)
            }
            _ => None,
        }
    }
}

/// One event counted in the table by tool.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolTick {
    /// The event's unix minute.
    pub minute: i64,
    pub namespace: String,
    pub tool: String,
    pub measure: ToolMeasure,
}

/// The ticks of `events`, each about one of `operations` (as the decision left them); an
/// event about none of them counts nothing.
pub fn tool_ticks<'a>(
    events: &[Event],
    operations: impl IntoIterator<Item = &'a Operation>,
) -> Vec<ToolTick> {
    let operations: Vec<&Operation> = operations.into_iter().collect();
    events
        .iter()
        .filter_map(|event| {
            let operation = operations.iter().find(|o| o.id == event.operation_id)?;
            Some(ToolTick {
                minute: unix_minute(event.at),
                namespace: operation.namespace.to_string(),
                tool: operation.tool.to_string(),
                measure: ToolMeasure::of(event, operation)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::fixtures::{fresh, refund_request as request};
    use crate::ledger::{decide_claim, decide_report, Claim, Report};
    use chrono::{DateTime, TimeDelta, Utc};
    use serde_json::json;

    fn tick(at: DateTime<Utc>, measure: ToolMeasure) -> ToolTick {
        ToolTick {
            minute: unix_minute(at),
            namespace: "billing".into(),
            tool: "refund".into(),
            measure,
        }
    }

    /// Fails `operation` at `at` (retryable or not); the decision's ticks and the operation.
    fn fail(
        operation: Operation,
        at: DateTime<Utc>,
        retryable: bool,
    ) -> (Vec<ToolTick>, Operation) {
        let declined = Report::Completed {
            succeeded: false,
            result: None,
            error: Some(json!({ "code": "card_declined" })),
            retryable,
            provider_ref: None,
        };
        let failed = decide_report(operation, "new-token", &declined, "a", at);
        let ticks = tool_ticks(&failed.events, failed.written());
        (ticks, failed.outcome.unwrap())
    }

    #[test]
    fn a_new_key_counts_an_operation_and_its_repeat_a_duplicate() {
        let at = Utc::now();
        let started = decide_claim(None, &request(), "a", fresh(), at);
        let ticks = tool_ticks(&started.events, started.written());
        assert_eq!(ticks, [tick(at, ToolMeasure::Operations)]);

        let operation = started.outcome.operation().clone();
        let later = at + TimeDelta::seconds(1);
        let in_flight = decide_claim(Some(operation.clone()), &request(), "a", fresh(), later);
        assert!(matches!(in_flight.outcome, Claim::InProgress { .. }));
        assert!(
            in_flight.written().next().is_none(),
            "a repeat writes nothing"
        );
        let ticks = tool_ticks(&in_flight.events, [in_flight.outcome.operation()]);
        assert_eq!(ticks, [tick(later, ToolMeasure::DuplicatesPrevented)]);
    }

    #[test]
    fn a_failure_counts_each_time_and_a_retry_is_no_new_operation() {
        let at = Utc::now();
        let started = decide_claim(None, &request(), "a", fresh(), at);
        let failed_at = at + TimeDelta::seconds(10);
        let (ticks, failed) = fail(started.outcome.operation().clone(), failed_at, true);
        assert_eq!(ticks, [tick(failed_at, ToolMeasure::Failures)]);

        let retried_at = failed_at + TimeDelta::seconds(5);
        let retry = decide_claim(Some(failed), &request(), "a", fresh(), retried_at);
        assert!(matches!(retry.outcome, Claim::Started { .. }));
        assert_eq!(
            tool_ticks(&retry.events, retry.written()),
            [],
            "the operation was created before: its new claim is no new operation"
        );
        let failed_again_at = retried_at + TimeDelta::seconds(1);
        let (ticks, _) = fail(retry.outcome.operation().clone(), failed_again_at, false);
        assert_eq!(ticks, [tick(failed_again_at, ToolMeasure::Failures)]);
    }

    #[test]
    fn a_success_and_an_event_of_another_operation_count_nothing() {
        let at = Utc::now();
        let started = decide_claim(None, &request(), "a", fresh(), at);
        let operation = started.outcome.operation().clone();
        let done = Report::Completed {
            succeeded: true,
            result: Some(json!({ "refund_id": "r-1" })),
            error: None,
            retryable: false,
            provider_ref: None,
        };
        let succeeded = decide_report(operation, "new-token", &done, "a", at);
        assert_eq!(tool_ticks(&succeeded.events, succeeded.written()), []);

        let elsewhere = decide_claim(None, &request(), "a", fresh(), at);
        assert_eq!(
            tool_ticks(&started.events, elsewhere.written()),
            [],
            "events are counted only against their own operation"
        );
    }

    #[test]
    fn every_measure_has_a_name_it_is_read_back_by() {
        for measure in ToolMeasure::ALL {
            assert_eq!(ToolMeasure::parse(measure.as_str()), Some(measure));
        }
        assert_eq!(ToolMeasure::parse("latency"), None);
    }
}
