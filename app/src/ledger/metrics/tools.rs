//! `GET /v1/metrics/tools`: where the trouble is, one row per namespace and tool.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::latency::percentile;

/// One tool of one namespace over the window (counts) and now (gauges).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ToolMetrics {
    pub namespace: String,
    pub tool: String,
    /// Operations created in the window.
    pub operations: u64,
    /// Repeats answered without a new action in the window: `replayed`, `in_flight_rejected`,
    /// `blocked_unknown` and `blocked_awaiting_approval` events, as in `GET /v1/metrics`.
    pub duplicates_prevented: u64,
    /// Settlements that left their operation `failed` in the window.
    pub failures: u64,
    /// Live operations `unknown` now.
    pub unknown_now: u64,
    /// Of those, the ones `unknown` for longer than the stuck threshold.
    pub stuck_unknown: u64,
    /// Live operations `awaiting_approval` now.
    pub awaiting_approval: u64,
    /// The 95th percentile of how long its operations reconciled in the window had been
    /// `unknown`; `null` when none was reconciled.
    pub reconciliation_p95_ms: Option<u64>,
}

/// What the store counted for one namespace and tool; rows of the same pair are summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCounts {
    /// The counts; its `reconciliation_p95_ms` is left out (computed from `reconciled_ms`).
    pub counted: ToolMetrics,
    /// `unknown_for_ms` of each `reconciled` event in the window.
    pub reconciled_ms: Vec<u64>,
}

impl ToolMetrics {
    fn add(&mut self, other: &ToolMetrics) {
        self.operations += other.operations;
        self.duplicates_prevented += other.duplicates_prevented;
        self.failures += other.failures;
        self.unknown_now += other.unknown_now;
        self.stuck_unknown += other.stuck_unknown;
        self.awaiting_approval += other.awaiting_approval;
    }
}

/// One row per namespace and tool with anything to show, by namespace then tool.
pub fn assemble_tools(counts: Vec<ToolCounts>) -> Vec<ToolMetrics> {
    let mut merged = std::collections::BTreeMap::<(String, String), ToolCounts>::new();
    for count in counts {
        let pair = (count.counted.namespace.clone(), count.counted.tool.clone());
        let row = merged.entry(pair).or_default();
        row.counted.add(&count.counted);
        row.reconciled_ms.extend(count.reconciled_ms);
    }
    merged
        .into_iter()
        .map(|((namespace, tool), mut row)| {
            row.reconciled_ms.sort_unstable();
            ToolMetrics {
                namespace,
                tool,
                reconciliation_p95_ms: percentile(&row.reconciled_ms, 95),
                ..row.counted
            }
        })
        .collect()
}

/// `GET /v1/metrics/tools`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ToolsReport {
    /// The window as asked, e.g. `24h`.
    pub window: String,
    /// The window's start: counts are of what happened from then on.
    pub from: DateTime<Utc>,
    /// The stuck threshold, `IDEM_STUCK_AFTER`.
    pub stuck_after_seconds: u64,
    /// By namespace, then tool.
    pub tools: Vec<ToolMetrics>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(namespace: &str, tool: &str) -> ToolMetrics {
        ToolMetrics {
            namespace: namespace.into(),
            tool: tool.into(),
            ..ToolMetrics::default()
        }
    }

    fn counts(counted: ToolMetrics) -> ToolCounts {
        ToolCounts {
            counted,
            reconciled_ms: Vec::new(),
        }
    }

    #[test]
    fn rows_of_one_tool_merge_and_sort_by_namespace_then_tool() {
        let rows = assemble_tools(vec![
            counts(ToolMetrics {
                operations: 3,
                failures: 1,
                ..metrics("shop", "refund")
            }),
            ToolCounts {
                counted: ToolMetrics {
                    duplicates_prevented: 4,
                    ..metrics("shop", "refund")
                },
                reconciled_ms: (1..=20).collect(),
            },
            counts(ToolMetrics {
                unknown_now: 2,
                stuck_unknown: 1,
                awaiting_approval: 5,
                ..metrics("billing", "wire")
            }),
            counts(metrics("shop", "email")),
        ]);
        let names: Vec<_> = rows.iter().map(|r| (&*r.namespace, &*r.tool)).collect();
        assert_eq!(
            names,
            [("billing", "wire"), ("shop", "email"), ("shop", "refund")]
        );
        assert_eq!(
            rows[2],
            ToolMetrics {
                namespace: "shop".into(),
                tool: "refund".into(),
                operations: 3,
                duplicates_prevented: 4,
                failures: 1,
                reconciliation_p95_ms: Some(19),
                ..ToolMetrics::default()
            }
        );
        assert_eq!(rows[0].stuck_unknown, 1);
        assert_eq!(rows[1].reconciliation_p95_ms, None);
    }
}
