//! The process's counters and histograms, served as Prometheus text by `GET /metrics`.
//!
//! Every recording goes through one of the named methods of [`Telemetry`], so the claim path,
//! the lease reaper, reconciliation and the manual interventions count the same way. The
//! instruments live in a registry of their own (not the crate's global one): each
//! application — and so each test server — counts only what it did. The counters are per
//! process; a scraper sums them over the processes behind a load balancer.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry, TextEncoder,
};
use std::sync::Arc;
use std::time::Duration;

use super::claim::Claim;
use super::error::LedgerError;
use super::model::{Event, EventKind};

/// How a claim was answered, as the `outcome` label of `idem_claims_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    Started,
    Replayed,
    InProgress,
    OutcomeUnknown,
    AwaitingApproval,
    KeyReused,
    /// Refused by the ledger as invalid (400): bad tool name, args, key or key fields.
    Invalid,
}

impl ClaimOutcome {
    const ALL: [ClaimOutcome; 7] = [
        ClaimOutcome::Started,
        ClaimOutcome::Replayed,
        ClaimOutcome::InProgress,
        ClaimOutcome::OutcomeUnknown,
        ClaimOutcome::AwaitingApproval,
        ClaimOutcome::KeyReused,
        ClaimOutcome::Invalid,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            ClaimOutcome::Started => "started",
            ClaimOutcome::Replayed => "replayed",
            ClaimOutcome::InProgress => "in_progress",
            ClaimOutcome::OutcomeUnknown => "outcome_unknown",
            ClaimOutcome::AwaitingApproval => "awaiting_approval",
            ClaimOutcome::KeyReused => "key_reused",
            ClaimOutcome::Invalid => "invalid",
        }
    }

    /// The outcome of an answered claim.
    pub fn of(claim: &Claim) -> Self {
        match claim {
            Claim::Started { .. } => ClaimOutcome::Started,
            Claim::Replayed { .. } => ClaimOutcome::Replayed,
            Claim::InProgress { .. } => ClaimOutcome::InProgress,
            Claim::OutcomeUnknown { .. } => ClaimOutcome::OutcomeUnknown,
            Claim::AwaitingApproval { .. } => ClaimOutcome::AwaitingApproval,
            Claim::KeyReused { .. } => ClaimOutcome::KeyReused,
        }
    }
}

/// What reconciliation learnt, as the `result` label of `idem_reconciliations_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// The provider has the effect: the operation `succeeded`.
    Found,
    /// The provider never saw it: `failed`, retryable.
    NotFound,
    /// The lookup failed; it will be tried again.
    Error,
}

impl ReconcileResult {
    const ALL: [ReconcileResult; 3] = [
        ReconcileResult::Found,
        ReconcileResult::NotFound,
        ReconcileResult::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            ReconcileResult::Found => "found",
            ReconcileResult::NotFound => "not_found",
            ReconcileResult::Error => "error",
        }
    }
}

/// A person's intervention, as the `kind` label of `idem_manual_interventions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intervention {
    Resolve,
    Expire,
}

impl Intervention {
    const ALL: [Intervention; 2] = [Intervention::Resolve, Intervention::Expire];

    fn label(self) -> &'static str {
        match self {
            Intervention::Resolve => "resolve",
            Intervention::Expire => "expire",
        }
    }
}

/// The instruments. Labelled children are resolved once here, so recording on the claim
/// path is an atomic add, without a label lookup.
struct Instruments {
    registry: Registry,
    claims: Vec<IntCounter>,
    replays: IntCounter,
    in_flight_rejections: IntCounter,
    mismatches: IntCounter,
    marked_unknown: IntCounter,
    reconciliations: Vec<IntCounter>,
    manual_interventions: Vec<IntCounter>,
    claim_seconds: Histogram,
    reconciliation_seconds: Histogram,
}

/// The application's metrics. Cheap to clone; clones share the instruments.
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Instruments>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

/// Claim latency: a claim is one short transaction, so the buckets are fine-grained.
const CLAIM_BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
/// From `unknown` to reconciled: seconds (a quick lookup) to a day (backoff, outages).
const RECONCILIATION_BUCKETS: [f64; 11] = [
    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0,
];

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let counter = IntCounter::new(name, help).expect("a valid metric name");
    registry
        .register(Box::new(counter.clone()))
        .expect("each metric is registered once");
    counter
}

fn labelled(
    registry: &Registry,
    name: &str,
    help: &str,
    label: &str,
    values: &[&str],
) -> Vec<IntCounter> {
    let family = IntCounterVec::new(Opts::new(name, help), &[label]).expect("a valid metric name");
    registry
        .register(Box::new(family.clone()))
        .expect("each metric is registered once");
    // Every label value exists from the start, at 0, so `rate()` works from the first scrape.
    values
        .iter()
        .map(|value| family.with_label_values(&[*value]))
        .collect()
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: &[f64]) -> Histogram {
    let histogram = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
        .expect("valid histogram options");
    registry
        .register(Box::new(histogram.clone()))
        .expect("each metric is registered once");
    histogram
}

impl Telemetry {
    /// Fresh instruments, all at zero.
    pub fn new() -> Self {
        let registry = Registry::new();
        let outcomes: Vec<&str> = ClaimOutcome::ALL.iter().map(|o| o.label()).collect();
        let results: Vec<&str> = ReconcileResult::ALL.iter().map(|r| r.label()).collect();
        let kinds: Vec<&str> = Intervention::ALL.iter().map(|k| k.label()).collect();
        let instruments = Instruments {
            claims: labelled(
                &registry,
                "idem_claims_total",
                "Claims answered, by outcome",
                "outcome",
                &outcomes,
            ),
            replays: counter(
                &registry,
                "idem_replays_total",
                "Stored outcomes replayed instead of acting again",
            ),
            in_flight_rejections: counter(
                &registry,
                "idem_in_flight_rejections_total",
                "Duplicates refused while the first was running (409 operation_in_progress)",
            ),
            mismatches: counter(
                &registry,
                "idem_mismatches_total",
                "Keys reused with different arguments (422 idempotency_key_reused)",
            ),
            marked_unknown: counter(
                &registry,
                "idem_marked_unknown_total",
                "Operations that became unknown: reported so, or their lease ran out",
            ),
            reconciliations: labelled(
                &registry,
                "idem_reconciliations_total",
                "Reconciliation lookups, by result",
                "result",
                &results,
            ),
            manual_interventions: labelled(
                &registry,
                "idem_manual_interventions_total",
                "Operations settled or ended by a person, by kind",
                "kind",
                &kinds,
            ),
            claim_seconds: histogram(
                &registry,
                "idem_claim_duration_seconds",
                "Time to answer a claim, from the parsed request to the decision",
                &CLAIM_BUCKETS,
            ),
            reconciliation_seconds: histogram(
                &registry,
                "idem_reconciliation_latency_seconds",
                "Time from an operation becoming unknown to its reconciliation",
                &RECONCILIATION_BUCKETS,
            ),
            registry,
        };
        Self {
            inner: Arc::new(instruments),
        }
    }

    /// A claim was answered with `outcome` after `elapsed`.
    pub fn claim_answered(&self, outcome: ClaimOutcome, elapsed: Duration) {
        let i = &self.inner;
        i.claims[outcome as usize].inc();
        i.claim_seconds.observe(elapsed.as_secs_f64());
        match outcome {
            ClaimOutcome::Replayed => i.replays.inc(),
            ClaimOutcome::InProgress => i.in_flight_rejections.inc(),
            ClaimOutcome::KeyReused => i.mismatches.inc(),
            _ => {}
        }
    }

    /// Records what a claim came to; a storage failure (a 500) is not an outcome.
    pub fn claim_result(&self, result: &Result<Claim, LedgerError>, elapsed: Duration) {
        let outcome = match result {
            Ok(claim) => ClaimOutcome::of(claim),
            Err(LedgerError::Invalid { .. }) => ClaimOutcome::Invalid,
            Err(_) => return,
        };
        self.claim_answered(outcome, elapsed);
    }

    /// `count` operations became `unknown`.
    pub fn marked_unknown(&self, count: u64) {
        self.inner.marked_unknown.inc_by(count);
    }

    /// A reconciliation lookup ended with `result`; `unknown_for` is how long the operation
    /// had been unknown when it was settled (`None` for a failed lookup).
    pub fn reconciled(&self, result: ReconcileResult, unknown_for: Option<Duration>) {
        self.inner.reconciliations[result as usize].inc();
        if let Some(latency) = unknown_for {
            self.inner
                .reconciliation_seconds
                .observe(latency.as_secs_f64());
        }
    }

    /// A person resolved or expired an operation.
    pub fn manual_intervention(&self, kind: Intervention) {
        self.inner.manual_interventions[kind as usize].inc();
    }

    /// Counts what committed events say happened: operations marked `unknown` (reported, or
    /// a lease that ran out), reconciliations and manual interventions. Call it with the
    /// events of every decision that was committed; other kinds are ignored.
    pub fn events_committed(&self, events: &[Event]) {
        for event in events {
            match event.kind {
                EventKind::MarkedUnknown | EventKind::LeaseExpired => self.marked_unknown(1),
                EventKind::Reconciled => {
                    let found = event.detail["found"].as_bool().unwrap_or(false);
                    let result = if found {
                        ReconcileResult::Found
                    } else {
                        ReconcileResult::NotFound
                    };
                    let unknown_for = event.detail["unknown_for_ms"]
                        .as_u64()
                        .map(Duration::from_millis);
                    self.reconciled(result, unknown_for);
                }
                EventKind::ReconcileAttempted => self.reconciled(ReconcileResult::Error, None),
                EventKind::Resolved => self.manual_intervention(Intervention::Resolve),
                EventKind::Expired => self.manual_intervention(Intervention::Expire),
                _ => {}
            }
        }
    }

    /// Every instrument in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.inner.registry.gather())
            .unwrap_or_else(|error| format!("# encoding failed: {error}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;

    fn event(kind: EventKind, detail: serde_json::Value) -> Event {
        Event {
            operation_id: Uuid::nil(),
            at: chrono::Utc::now(),
            kind,
            actor: "system".into(),
            detail,
        }
    }

    fn line<'a>(text: &'a str, series: &str) -> &'a str {
        text.lines()
            .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    #[test]
    fn every_labelled_series_exists_at_zero_before_anything_happens() {
        let text = Telemetry::new().render();
        assert_eq!(
            line(&text, "idem_claims_total{outcome=\"invalid\"}"),
            "idem_claims_total{outcome=\"invalid\"} 0"
        );
        assert_eq!(
            line(&text, "idem_reconciliations_total{result=\"not_found\"}"),
            "idem_reconciliations_total{result=\"not_found\"} 0"
        );
        assert_eq!(
            line(&text, "idem_manual_interventions_total{kind=\"expire\"}"),
            "idem_manual_interventions_total{kind=\"expire\"} 0"
        );
        assert_eq!(
            line(&text, "idem_claim_duration_seconds_count"),
            "idem_claim_duration_seconds_count 0"
        );
    }

    #[test]
    fn a_claim_counts_its_outcome_and_the_duplicate_it_prevented() {
        let telemetry = Telemetry::new();
        telemetry.claim_answered(ClaimOutcome::Replayed, Duration::from_millis(2));
        telemetry.claim_answered(ClaimOutcome::InProgress, Duration::from_millis(2));
        telemetry.claim_answered(ClaimOutcome::KeyReused, Duration::from_millis(2));
        let text = telemetry.render();
        assert!(
            text.contains("idem_claims_total{outcome=\"replayed\"} 1"),
            "{text}"
        );
        assert!(text.contains("idem_replays_total 1"), "{text}");
        assert!(text.contains("idem_in_flight_rejections_total 1"), "{text}");
        assert!(text.contains("idem_mismatches_total 1"), "{text}");
        assert!(
            text.contains("idem_claim_duration_seconds_count 3"),
            "{text}"
        );
    }

    #[test]
    fn committed_events_count_unknowns_reconciliations_and_interventions() {
        let telemetry = Telemetry::new();
        telemetry.events_committed(&[
            event(EventKind::MarkedUnknown, json!({})),
            event(EventKind::LeaseExpired, json!({})),
            event(
                EventKind::Reconciled,
                json!({ "found": true, "unknown_for_ms": 90_000 }),
            ),
            event(
                EventKind::Reconciled,
                json!({ "found": false, "unknown_for_ms": 1_000 }),
            ),
            event(EventKind::ReconcileAttempted, json!({})),
            event(EventKind::Resolved, json!({})),
            event(EventKind::Expired, json!({})),
            event(EventKind::Claimed, json!({})),
        ]);
        let text = telemetry.render();
        for expected in [
            "idem_marked_unknown_total 2",
            "idem_reconciliations_total{result=\"found\"} 1",
            "idem_reconciliations_total{result=\"not_found\"} 1",
            "idem_reconciliations_total{result=\"error\"} 1",
            "idem_manual_interventions_total{kind=\"resolve\"} 1",
            "idem_manual_interventions_total{kind=\"expire\"} 1",
            "idem_reconciliation_latency_seconds_count 2",
            "idem_reconciliation_latency_seconds_sum 91",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
    }
}
