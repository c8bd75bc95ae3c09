//! What the UI shows, as the server functions send it to the browser: plain serializable
//! views of the ledger's records, compiled for both sides. The server builds them from its
//! own types (under `ssr`); the browser only reads them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::{Effect, OperationStatus};

/// How long an operation may be `unknown` before it is stuck (`IDEM_STUCK_AFTER`), in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckAfter(pub i64);

impl StuckAfter {
    pub fn of(threshold: chrono::TimeDelta) -> Self {
        Self(threshold.num_seconds())
    }

    /// As people read it: `15 minutes`, `2 hours`, `90 seconds`.
    pub fn words(self) -> String {
        let seconds = self.0;
        let (count, unit) = if seconds % 3600 == 0 {
            (seconds / 3600, "hour")
        } else if seconds % 60 == 0 {
            (seconds / 60, "minute")
        } else {
            (seconds, "second")
        };
        format!("{count} {unit}{}", if count == 1 { "" } else { "s" })
    }
}

/// One row of the operations table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationRow {
    pub id: Uuid,
    pub namespace: String,
    pub key: String,
    pub tool: String,
    pub effect: Effect,
    pub status: OperationStatus,
    pub run_id: Option<String>,
    pub step: Option<u64>,
    pub attempt: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub unknown_since: Option<DateTime<Utc>>,
    /// How often the provider was asked about it (for `unknown` ones).
    pub reconcile_attempts: u32,
    /// When the reconciler asks next, if it will.
    pub next_reconcile_at: Option<DateTime<Utc>>,
}

impl OperationRow {
    /// Whether it has been `unknown` for longer than `stuck_after` at `now`.
    pub fn is_stuck(&self, now: DateTime<Utc>, stuck_after: StuckAfter) -> bool {
        // Rows unknown from before `unknown_since` was kept count from their last change, as
        // the stuck gauge and the list's stuck filter count them.
        let since = self.unknown_since.unwrap_or(self.updated_at);
        self.status == OperationStatus::Unknown && (now - since).num_seconds() > stuck_after.0
    }
}

/// A moment typed into a filter form: RFC 3339, or what a `datetime-local` field sends
/// (`2026-12-05T14:30`, seconds optional), which the form labels as UTC.
pub fn parse_form_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.to_utc());
    }
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
        .map(|naive| naive.and_utc())
}

/// A moment as a `datetime-local` field shows it, in UTC.
pub fn form_time_value(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// A person's decision on an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub decided_by: String,
    pub decided_at: DateTime<Utc>,
    pub decision: String,
    pub reason: Option<String>,
}

/// One entry of an operation's audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub actor: String,
    pub detail: Value,
}

/// Everything the detail page shows about one operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationDetail {
    pub row: OperationRow,
    pub key_source: String,
    pub fingerprint: String,
    /// What the provider was (or is to be) sent as its idempotency key.
    pub provider_key: String,
    /// Already redacted when it was stored.
    pub args: Value,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub retryable: bool,
    pub provider_ref: Option<String>,
    pub completed_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
    pub approval: Option<ApprovalView>,
    pub approval_expires_at: Option<DateTime<Utc>>,
    /// `agent` or `idem`: who runs the tool.
    pub runner: String,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub reconcile_attempts: u32,
    pub next_reconcile_at: Option<DateTime<Utc>>,
    /// The newest events, oldest of them first.
    pub events: EventsView,
}

/// A stretch of an operation's audit trail, oldest first, and the cursor of the events
/// before it, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsView {
    pub events: Vec<EventView>,
    pub earlier: Option<String>,
}

#[cfg(feature = "ssr")]
mod from_ledger {
    impl From<crate::ledger::metrics::ToolMetrics> for super::ToolRow {
        fn from(row: crate::ledger::metrics::ToolMetrics) -> Self {
            Self {
                namespace: row.namespace,
                tool: row.tool,
                operations: row.operations,
                duplicates_prevented: row.duplicates_prevented,
                failures: row.failures,
                unknown_now: row.unknown_now,
                stuck_unknown: row.stuck_unknown,
                awaiting_approval: row.awaiting_approval,
                reconciliation_p95_ms: row.reconciliation_p95_ms,
            }
        }
    }

    use super::*;
    use crate::ledger::{Approval, Event, EventsPage, Operation, Runner};

    impl From<&Operation> for OperationRow {
        fn from(operation: &Operation) -> Self {
            Self {
                id: operation.id,
                namespace: operation.namespace.to_string(),
                key: operation.key.to_string(),
                tool: operation.tool.to_string(),
                effect: operation.effect,
                status: operation.status,
                run_id: operation.run_id.clone(),
                step: operation.step,
                attempt: operation.attempt,
                created_at: operation.created_at,
                updated_at: operation.updated_at,
                unknown_since: operation.unknown_since,
                reconcile_attempts: operation.reconcile_attempts,
                next_reconcile_at: operation.next_reconcile_at,
            }
        }
    }

    impl From<&Approval> for ApprovalView {
        fn from(approval: &Approval) -> Self {
            Self {
                decided_by: approval.decided_by.clone(),
                decided_at: approval.decided_at,
                decision: approval.decision.clone(),
                reason: approval.reason.clone(),
            }
        }
    }

    impl From<Event> for EventView {
        fn from(event: Event) -> Self {
            Self {
                at: event.at,
                kind: event.kind.as_str().to_owned(),
                actor: event.actor,
                detail: event.detail,
            }
        }
    }

    impl OperationDetail {
        /// The detail view of an operation and the newest page of its audit trail.
        pub fn new(operation: &Operation, events: EventsPage) -> Self {
            Self {
                row: operation.into(),
                key_source: operation.key_source.as_str().to_owned(),
                fingerprint: operation.fingerprint.to_string(),
                provider_key: operation.provider_key.clone(),
                args: operation.args.clone(),
                result: operation.result.clone(),
                error: operation.error.clone(),
                retryable: operation.retryable,
                provider_ref: operation.provider_ref.clone(),
                completed_at: operation.completed_at,
                expires_at: operation.expires_at,
                approval: operation.approval.as_ref().map(ApprovalView::from),
                approval_expires_at: operation.approval_expires_at,
                runner: match operation.runner {
                    Runner::Agent => "agent",
                    Runner::Idem => "idem",
                }
                .to_owned(),
                lease_expires_at: operation.lease.as_ref().map(|lease| lease.expires_at),
                reconcile_attempts: operation.reconcile_attempts,
                next_reconcile_at: operation.next_reconcile_at,
                events: EventsView::from(events),
            }
        }
    }

    impl From<EventsPage> for EventsView {
        /// A page read newest first, shown oldest first.
        fn from(page: EventsPage) -> Self {
            Self {
                events: page.events.into_iter().rev().map(EventView::from).collect(),
                earlier: page.next.map(|position| position.cursor()),
            }
        }
    }
}

/// The overview's numbers for one window, and its charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverviewView {
    /// `1h`, `24h` or `7d`.
    pub window: String,
    pub duplicates_prevented: u64,
    pub in_flight_rejected: u64,
    pub mismatches_rejected: u64,
    pub unknown_now: u64,
    pub stuck_unknown: u64,
    pub stuck_after: StuckAfter,
    pub awaiting_approval: u64,
    pub manual_interventions: u64,
    pub reconciliations: u64,
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub charts: Vec<ChartView>,
}

/// One row of the overview's table by tool: a namespace's tool over the window and now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRow {
    pub namespace: String,
    pub tool: String,
    pub operations: u64,
    pub duplicates_prevented: u64,
    pub failures: u64,
    pub unknown_now: u64,
    pub stuck_unknown: u64,
    pub awaiting_approval: u64,
    pub reconciliation_p95_ms: Option<u64>,
}

/// The overview's table by tool, and when its window starts (for links to the list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolTable {
    pub from: DateTime<Utc>,
    pub rows: Vec<ToolRow>,
}

/// A chart drawn on the server, with its legend and the table behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartView {
    /// A stable id for the page (`duplicates`, `latency`, `interventions`, `stuck`).
    pub id: String,
    pub title: String,
    /// The unit of the values (`ms`), or empty for counts.
    pub unit: String,
    /// The value axis and the plot: two inline SVGs, each bucket with a `<title>` of its
    /// exact values.
    pub drawing: String,
    pub legend: Vec<LegendEntry>,
    /// The accessible table: column names, then one row per bucket, oldest first.
    pub columns: Vec<String>,
    pub rows: Vec<ChartRow>,
}

/// One series in a chart's legend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegendEntry {
    pub name: String,
    /// Its colour: `hue-N` in the stylesheet.
    pub hue: u8,
    /// Drawn as bars (else as a line).
    pub bar: bool,
}

/// One bucket of a chart's table: its start and its values, as shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartRow {
    pub at: DateTime<Utc>,
    pub values: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    #[test]
    fn form_times_are_rfc_3339_or_datetime_local_in_utc() {
        let at = Utc.with_ymd_and_hms(2026, 12, 5, 14, 30, 0).unwrap();
        for text in [
            "2026-12-05T14:30",
            "2026-12-05T14:30:00",
            "2026-12-05T14:30:00Z",
            "2026-12-05T15:30:00+01:00",
        ] {
            assert_eq!(parse_form_time(text), Some(at), "{text}");
        }
        for text in ["", "yesterday", "2026-12-05", "2026-13-05T14:30", "14:30"] {
            assert_eq!(parse_form_time(text), None, "{text}");
        }
        assert_eq!(form_time_value(at), "2026-12-05T14:30:00");
        assert_eq!(parse_form_time(&form_time_value(at)), Some(at));
    }

    fn row(
        status: OperationStatus,
        unknown_for: Option<Duration>,
        now: DateTime<Utc>,
    ) -> OperationRow {
        OperationRow {
            id: Uuid::nil(),
            namespace: "billing".into(),
            key: "refund:order-1".into(),
            tool: "refund".into(),
            effect: Effect::NonIdempotentWrite,
            status,
            run_id: None,
            step: None,
            attempt: 1,
            created_at: now - Duration::hours(1),
            updated_at: now,
            unknown_since: unknown_for.map(|d| now - d),
            reconcile_attempts: 0,
            next_reconcile_at: None,
        }
    }

    #[test]
    fn only_an_unknown_older_than_the_threshold_is_stuck() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
        let threshold = Duration::minutes(20);
        let after = StuckAfter::of(threshold);
        let unknown = OperationStatus::Unknown;
        assert!(row(unknown, Some(threshold + Duration::seconds(1)), now).is_stuck(now, after));
        assert!(!row(unknown, Some(threshold), now).is_stuck(now, after));
        assert!(!row(unknown, None, now).is_stuck(now, after));
        let mut legacy = row(unknown, None, now);
        legacy.updated_at = now - threshold - Duration::seconds(1);
        assert!(legacy.is_stuck(now, after), "counts from its last change");
        let long_ago = Some(Duration::days(1));
        assert!(!row(OperationStatus::Pending, long_ago, now).is_stuck(now, after));
        assert!(!row(OperationStatus::Succeeded, long_ago, now).is_stuck(now, after));
    }

    #[test]
    fn the_stuck_threshold_reads_in_its_largest_whole_unit() {
        assert_eq!(StuckAfter(900).words(), "15 minutes");
        assert_eq!(StuckAfter(3600).words(), "1 hour");
        assert_eq!(StuckAfter(7200).words(), "2 hours");
        assert_eq!(StuckAfter(90).words(), "90 seconds");
        assert_eq!(StuckAfter(60).words(), "1 minute");
    }
}
