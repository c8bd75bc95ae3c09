//! The overview's numbers and charts for one window.

use leptos::prelude::*;

use crate::views::{OverviewView, ToolTable};
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{answer_with_status, metrics, person_who_may};

/// The windows the overview offers.
pub const WINDOWS: [&str; 3] = ["1h", "24h", "7d"];

/// Counters, gauges and charts over `window` (`1h`, `24h` or `7d`), across every namespace.
#[server(prefix = "/api", endpoint = "overview")]
pub async fn overview(window: String) -> Result<OverviewView, UiError> {
    use crate::domain::Permission;

    // Taken before the first await: the context is not there once the fetch resumes.
    let metrics = metrics()?;
    person_who_may(Permission::Read).await?;
    checked_window(&window)?;
    let report = metrics.read(None, Some(&window)).await.map_err(|error| {
        tracing::error!(%error, "metrics failed for the overview");
        answer_with_status(UiError::Internal)
    })?;
    Ok(view_of(report))
}

/// The table by namespace and tool over `window`: what happened and what waits.
#[server(prefix = "/api", endpoint = "overview_tools")]
pub async fn tools_overview(window: String) -> Result<ToolTable, UiError> {
    use crate::domain::Permission;

    let metrics = metrics()?;
    person_who_may(Permission::Read).await?;
    checked_window(&window)?;
    let report = metrics
        .read_tools(None, Some(&window))
        .await
        .map_err(|error| {
            tracing::error!(%error, "tool metrics failed for the overview");
            answer_with_status(UiError::Internal)
        })?;
    Ok(ToolTable {
        from: report.from,
        rows: report.tools.into_iter().map(Into::into).collect(),
    })
}

/// The window, if the overview offers it.
#[cfg(feature = "ssr")]
fn checked_window(window: &str) -> Result<(), UiError> {
    if WINDOWS.contains(&window) {
        return Ok(());
    }
    Err(answer_with_status(UiError::Invalid(format!(
        "the window must be one of {}",
        WINDOWS.join(", ")
    ))))
}

#[cfg(feature = "ssr")]
fn view_of(report: crate::ledger::metrics::MetricsReport) -> OverviewView {
    use crate::charts::{chart, Series, Style, BLUE, GREEN, ORANGE, RED};

    let starts: Vec<_> = report.series.iter().map(|b| b.bucket_start).collect();
    let per_bucket = |value: fn(&crate::ledger::metrics::Counters) -> Option<u64>| {
        report
            .series
            .iter()
            .map(|b| value(&b.counters).map(|v| v as f64))
            .collect::<Vec<_>>()
    };
    let duplicates = chart(
        "duplicates",
        "Duplicates prevented",
        &starts,
        &[
            Series {
                name: "duplicates prevented",
                hue: BLUE,
                values: per_bucket(|c| Some(c.duplicates_prevented)),
            },
            Series {
                name: "in flight (409)",
                hue: ORANGE,
                values: per_bucket(|c| Some(c.in_flight_rejected)),
            },
            Series {
                name: "mismatches (422)",
                hue: RED,
                values: per_bucket(|c| Some(c.mismatches_rejected)),
            },
        ],
        Style::Bars,
        "",
    );
    let latency = chart(
        "latency",
        "Reconciliation latency",
        &starts,
        &[
            Series {
                name: "p50",
                hue: GREEN,
                values: per_bucket(|c| c.reconciliation_latency_ms.p50),
            },
            Series {
                name: "p95",
                hue: ORANGE,
                values: per_bucket(|c| c.reconciliation_latency_ms.p95),
            },
        ],
        Style::Lines,
        " ms",
    );
    let interventions = chart(
        "interventions",
        "Reconciliations and manual interventions",
        &starts,
        &[
            Series {
                name: "reconciliations",
                hue: GREEN,
                values: per_bucket(|c| Some(c.reconciliations)),
            },
            Series {
                name: "manual interventions",
                hue: RED,
                values: per_bucket(|c| Some(c.manual_interventions)),
            },
        ],
        Style::Bars,
        "",
    );
    let stuck = chart(
        "stuck",
        "Stuck unknowns",
        &starts,
        &[Series {
            name: "stuck unknowns",
            hue: RED,
            values: report
                .series
                .iter()
                .map(|b| Some(b.stuck_unknown as f64))
                .collect(),
        }],
        Style::Lines,
        "",
    );
    let totals = &report.totals;
    OverviewView {
        window: report.window.clone(),
        duplicates_prevented: totals.duplicates_prevented,
        in_flight_rejected: totals.in_flight_rejected,
        mismatches_rejected: totals.mismatches_rejected,
        unknown_now: report.unknown_now,
        stuck_unknown: report.stuck_unknown,
        stuck_after: crate::views::StuckAfter(
            i64::try_from(report.stuck_after_seconds).unwrap_or(i64::MAX),
        ),
        awaiting_approval: report.awaiting_approval,
        manual_interventions: totals.manual_interventions,
        reconciliations: totals.reconciliations,
        latency_p50_ms: totals.reconciliation_latency_ms.p50,
        latency_p95_ms: totals.reconciliation_latency_ms.p95,
        charts: vec![duplicates, stuck, latency, interventions],
    }
}
