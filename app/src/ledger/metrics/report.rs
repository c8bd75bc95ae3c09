//! The answer of `GET /v1/metrics`, assembled from what the store counted.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use super::latency::Latency;
use super::window::{minute_start, unix_minute, SeriesPlan};
use crate::ledger::model::EventKind;

/// The event kinds the counters are made of (the store counts only these):
/// duplicates prevented, mismatches and manual interventions.
pub const COUNTED_KINDS: [EventKind; 7] = [
    EventKind::Replayed,
    EventKind::InFlightRejected,
    EventKind::BlockedUnknown,
    EventKind::BlockedAwaitingApproval,
    EventKind::MismatchRejected,
    EventKind::Resolved,
    EventKind::Expired,
];

/// How many events of one kind fell in one bucket (`back`: 0 = the newest bucket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCount {
    pub back: i64,
    pub kind: String,
    pub count: i64,
}

/// A `reconciled` event: when, and how long its operation had been `unknown` (`None` when
/// the event carries no whole `unknown_for_ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciledSample {
    pub at: DateTime<Utc>,
    pub unknown_for_ms: Option<u64>,
}

/// A time operations were `unknown`: from when they became so until they were settled
/// (`None`: they still are). A store may give the operations that share their stuck moments
/// as one span (e.g. those `unknown` since before the window, all stuck throughout it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownSpan {
    pub since: DateTime<Utc>,
    pub until: Option<DateTime<Utc>>,
    pub operations: u64,
}

impl UnknownSpan {
    /// Whether the operation was stuck at `at`: unknown then, and for longer than `stuck_after`.
    fn stuck_at(&self, at: DateTime<Utc>, stuck_after: TimeDelta) -> bool {
        at - self.since > stuck_after && self.until.is_none_or(|until| until > at)
    }
}

/// What waits now, whatever the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    pub unknown_now: u64,
    pub stuck_unknown: u64,
    pub awaiting_approval: u64,
}

/// The counters derived from events, for the whole window or one bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Counters {
    /// `replayed` + `in_flight_rejected` + `blocked_unknown` + `blocked_awaiting_approval`.
    pub duplicates_prevented: u64,
    /// `in_flight_rejected` events (also part of `duplicates_prevented`).
    pub in_flight_rejected: u64,
    /// `mismatch_rejected` events (422 `idempotency_key_reused`).
    pub mismatches_rejected: u64,
    /// `resolved` + `expired` events: a person settled or ended an operation.
    pub manual_interventions: u64,
    /// `reconciled` events (extension).
    pub reconciliations: u64,
    /// Over the `reconciled` events' `unknown_for_ms`.
    pub reconciliation_latency_ms: Latency,
}

/// One bucket of the series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Bucket {
    pub bucket_start: DateTime<Utc>,
    #[serde(flatten)]
    pub counters: Counters,
    /// Operations stuck at the bucket's last moment (its end, or now for the newest):
    /// `unknown` then, for longer than `stuck_after_seconds` (extension).
    pub stuck_unknown: u64,
}

/// `GET /v1/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MetricsReport {
    /// The window as asked, e.g. `24h` (extension).
    pub window: String,
    /// The window's start (extension).
    pub from: DateTime<Utc>,
    /// The window's end, exclusive: the end of the current minute (extension).
    pub to: DateTime<Utc>,
    /// The width of a bucket (extension); the oldest bucket may be shorter.
    pub bucket_seconds: u64,
    #[serde(flatten)]
    pub totals: Counters,
    /// Live operations `unknown` now.
    pub unknown_now: u64,
    /// Of those, the ones `unknown` for longer than `stuck_after_seconds`.
    pub stuck_unknown: u64,
    /// The stuck threshold, `IDEM_STUCK_AFTER` (extension).
    pub stuck_after_seconds: u64,
    /// Live operations `awaiting_approval` now.
    pub awaiting_approval: u64,
    /// Every bucket of the window, oldest first, zeros included.
    pub series: Vec<Bucket>,
}

impl Counters {
    fn add(&mut self, kind: &str, count: u64) {
        let is = |k: EventKind| kind == k.as_str();
        if is(EventKind::InFlightRejected) {
            self.in_flight_rejected += count;
        }
        if is(EventKind::Replayed)
            || is(EventKind::InFlightRejected)
            || is(EventKind::BlockedUnknown)
            || is(EventKind::BlockedAwaitingApproval)
        {
            self.duplicates_prevented += count;
        } else if is(EventKind::MismatchRejected) {
            self.mismatches_rejected += count;
        } else if is(EventKind::Resolved) || is(EventKind::Expired) {
            self.manual_interventions += count;
        }
    }

    fn add_counters(&mut self, other: &Counters) {
        self.duplicates_prevented += other.duplicates_prevented;
        self.in_flight_rejected += other.in_flight_rejected;
        self.mismatches_rejected += other.mismatches_rejected;
        self.manual_interventions += other.manual_interventions;
        self.reconciliations += other.reconciliations;
    }
}

/// Puts the store's counts and samples into the report. Counts outside the plan's buckets
/// (which a correct store never returns) are left out rather than trusted.
pub fn assemble(
    plan: &SeriesPlan,
    counts: &[KindCount],
    samples: &[ReconciledSample],
    spans: &[UnknownSpan],
    gauges: Gauges,
) -> MetricsReport {
    let buckets = plan.buckets();
    let mut by_back = vec![Counters::default(); buckets];
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); buckets];
    for row in counts {
        let back = usize::try_from(row.back).ok().filter(|b| *b < buckets);
        if let (Some(back), Ok(count)) = (back, u64::try_from(row.count)) {
            by_back[back].add(&row.kind, count);
        }
    }
    for sample in samples {
        if let Some(back) = plan.back_of_minute(unix_minute(sample.at)) {
            by_back[back].reconciliations += 1;
            latencies[back].extend(sample.unknown_for_ms);
        }
    }
    let mut totals = Counters::default();
    for counters in &by_back {
        totals.add_counters(counters);
    }
    totals.reconciliation_latency_ms = Latency::of(latencies.concat());
    let series = by_back
        .into_iter()
        .zip(latencies)
        .enumerate()
        .rev()
        .map(|(back, (mut counters, samples))| {
            counters.reconciliation_latency_ms = Latency::of(samples);
            let end = plan.bucket_end(back);
            Bucket {
                bucket_start: minute_start(plan.bucket_start_minute(back)),
                counters,
                stuck_unknown: spans
                    .iter()
                    .filter(|span| span.stuck_at(end, plan.stuck_after))
                    .map(|span| span.operations)
                    .sum(),
            }
        })
        .collect();
    MetricsReport {
        window: plan.window.to_string(),
        from: plan.from(),
        to: plan.to(),
        bucket_seconds: u64::try_from(plan.bucket_minutes * 60).unwrap_or(0),
        totals,
        unknown_now: gauges.unknown_now,
        stuck_unknown: gauges.stuck_unknown,
        stuck_after_seconds: u64::try_from(plan.stuck_after.num_seconds()).unwrap_or(0),
        awaiting_approval: gauges.awaiting_approval,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::metrics::{MetricsWindow, DEFAULT_STUCK_AFTER};

    fn count(back: i64, kind: EventKind, count: i64) -> KindCount {
        KindCount {
            back,
            kind: kind.as_str().into(),
            count,
        }
    }

    #[test]
    fn counts_land_in_their_buckets_oldest_first_and_sum_to_the_totals() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        let plan = SeriesPlan::new(
            MetricsWindow::try_from("1h").unwrap(),
            now,
            DEFAULT_STUCK_AFTER,
        );
        let counts = [
            count(0, EventKind::Replayed, 3),
            count(0, EventKind::InFlightRejected, 2),
            count(11, EventKind::BlockedUnknown, 1),
            count(11, EventKind::BlockedAwaitingApproval, 1),
            count(5, EventKind::MismatchRejected, 4),
            count(5, EventKind::Resolved, 1),
            count(6, EventKind::Expired, 1),
            count(6, EventKind::Claimed, 50),
            count(12, EventKind::Replayed, 99),
            count(-1, EventKind::Replayed, 99),
        ];
        let samples = [
            ReconciledSample {
                at: now,
                unknown_for_ms: Some(400),
            },
            ReconciledSample {
                at: now,
                unknown_for_ms: Some(100),
            },
            ReconciledSample {
                at: now - chrono::TimeDelta::minutes(59),
                unknown_for_ms: Some(9000),
            },
            ReconciledSample {
                at: now,
                unknown_for_ms: None,
            },
            ReconciledSample {
                at: now - chrono::TimeDelta::minutes(61),
                unknown_for_ms: Some(1),
            },
        ];
        let gauges = Gauges {
            unknown_now: 3,
            stuck_unknown: 1,
            awaiting_approval: 2,
        };
        let report = assemble(&plan, &counts, &samples, &[], gauges);

        assert_eq!(report.series.len(), 12);
        assert_eq!(
            report.series[0].bucket_start.to_rfc3339(),
            "2026-12-01T13:36:00+00:00"
        );
        assert_eq!(
            report.series[11].bucket_start.to_rfc3339(),
            "2026-12-01T14:31:00+00:00"
        );
        let newest = &report.series[11].counters;
        assert_eq!(
            (newest.duplicates_prevented, newest.in_flight_rejected),
            (5, 2)
        );
        assert_eq!(newest.reconciliations, 3);
        assert_eq!(
            newest.reconciliation_latency_ms,
            Latency {
                p50: Some(100),
                p95: Some(400),
                max: Some(400)
            }
        );
        assert_eq!(report.series[0].counters.duplicates_prevented, 2);
        assert_eq!(
            report.series[0].counters.reconciliation_latency_ms.max,
            Some(9000)
        );
        assert_eq!(report.series[6].counters.mismatches_rejected, 4);
        assert_eq!(report.series[6].counters.manual_interventions, 1);
        assert_eq!(report.series[5].counters.manual_interventions, 1);
        assert_eq!(report.series[1].counters, Counters::default());

        let t = &report.totals;
        assert_eq!(
            (
                t.duplicates_prevented,
                t.in_flight_rejected,
                t.mismatches_rejected,
                t.manual_interventions,
                t.reconciliations
            ),
            (7, 2, 4, 2, 4)
        );
        assert_eq!(
            t.reconciliation_latency_ms,
            Latency {
                p50: Some(400),
                p95: Some(9000),
                max: Some(9000)
            }
        );
        assert_eq!(
            (
                report.unknown_now,
                report.stuck_unknown,
                report.awaiting_approval
            ),
            (3, 1, 2)
        );
        assert_eq!((report.window.as_str(), report.bucket_seconds), ("1h", 300));
    }

    #[test]
    fn an_empty_window_has_every_bucket_at_zero_and_null_latencies() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        let plan = SeriesPlan::new(MetricsWindow::default(), now, DEFAULT_STUCK_AFTER);
        let report = assemble(&plan, &[], &[], &[], Gauges::default());
        assert_eq!(report.series.len(), 24);
        assert!(report
            .series
            .iter()
            .all(|b| b.counters == Counters::default()));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["reconciliation_latency_ms"],
            serde_json::json!({ "p50": null, "p95": null, "max": null })
        );
        assert_eq!(json["series"][0]["duplicates_prevented"], 0);
        assert_eq!(json["duplicates_prevented"], 0);
    }

    #[test]
    fn each_bucket_counts_the_operations_stuck_at_its_last_moment() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        let plan = SeriesPlan::new(
            MetricsWindow::try_from("1h").unwrap(),
            now,
            TimeDelta::minutes(15),
        );
        let at = |text: &str| DateTime::parse_from_rfc3339(text).unwrap().to_utc();
        let spans = [
            // Unknown since 13:40, settled at 14:10: stuck from 13:55 to 14:10.
            UnknownSpan {
                since: at("2026-12-01T13:40:00Z"),
                until: Some(at("2026-12-01T14:10:00Z")),
                operations: 1,
            },
            // Two unknown since 14:15, never settled: stuck from 14:30 on.
            UnknownSpan {
                since: at("2026-12-01T14:15:00Z"),
                until: None,
                operations: 2,
            },
            // Unknown for ten minutes only: never stuck.
            UnknownSpan {
                since: at("2026-12-01T14:00:00Z"),
                until: Some(at("2026-12-01T14:10:00Z")),
                operations: 1,
            },
        ];
        let report = assemble(&plan, &[], &[], &spans, Gauges::default());
        let stuck: Vec<(String, u64)> = report
            .series
            .iter()
            .map(|b| (b.bucket_start.format("%H:%M").to_string(), b.stuck_unknown))
            .collect();
        let expected: Vec<(String, u64)> = [
            ("13:36", 0), // ends 13:41: the first is unknown, not yet stuck
            ("13:41", 0),
            ("13:46", 0),
            ("13:51", 1), // ends 13:56: stuck since 13:55
            ("13:56", 1),
            ("14:01", 1),
            ("14:06", 0), // ends 14:11: settled at 14:10
            ("14:11", 0),
            ("14:16", 0),
            ("14:21", 0),
            ("14:26", 2), // ends 14:31: the second two are stuck since 14:30
            ("14:31", 2), // the newest ends now
        ]
        .into_iter()
        .map(|(start, n)| (start.to_owned(), n))
        .collect();
        assert_eq!(stuck, expected);
        assert_eq!(report.stuck_after_seconds, 900);
    }
}
