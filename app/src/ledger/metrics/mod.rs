//! `GET /v1/metrics`: what idem prevented and what is waiting, over a window, with a series.
//!
//! The counters come from the audit events (`operation_events`); the gauges (`unknown_now`,
//! `stuck_unknown`, `awaiting_approval`) from the operations as they are now. So that a 30-day
//! window stays fast at millions of events, a background worker folds the counted events of
//! past minutes into per-minute counts (`event_minutes`); a request reads those, plus the raw
//! events of the few minutes not folded yet.

mod latency;
mod report;
mod tool_ticks;
mod tools;
mod window;

pub use latency::{percentile, Latency};
pub use report::{
    assemble, Bucket, Counters, Gauges, KindCount, MetricsReport, ReconciledSample, UnknownSpan,
    COUNTED_KINDS,
};
pub use tool_ticks::{tool_ticks, ToolMeasure, ToolTick};
pub use tools::{assemble_tools, ToolCounts, ToolMetrics, ToolsReport};
pub use window::{
    minute_start, unix_minute, MetricsWindow, SeriesPlan, WindowError, DEFAULT_STUCK_AFTER,
    MAX_MINUTES,
};

use chrono::{DateTime, TimeDelta, Utc};
use std::ops::Range;
use std::sync::Arc;

use crate::domain::Namespace;
use crate::store_error::StoreError;

/// A minute is folded only once it ended this many minutes ago, so events committed a little
/// after their time (replays are written just after the answer) are in before it is counted.
pub const ROLLUP_GRACE_MINUTES: i64 = 2;
/// The most minutes one roll-up round folds: a first run over a long history goes in short
/// steps, so it never holds SQLite's one writer for long.
pub const ROLLUP_CHUNK_MINUTES: i64 = 60;

/// The minutes the next roll-up round folds: from the watermark (the first minute not
/// folded yet) up to the last minute past the grace period, at most a chunk. `None` when
/// there is nothing to fold yet.
pub fn next_rollup(watermark: i64, now: DateTime<Utc>) -> Option<Range<i64>> {
    let settled = unix_minute(now) - ROLLUP_GRACE_MINUTES;
    let end = settled.min(watermark.saturating_add(ROLLUP_CHUNK_MINUTES));
    (end > watermark).then_some(watermark..end)
}

/// The storage port of the metrics.
#[async_trait::async_trait]
pub trait MetricsStore: Send + Sync {
    /// The metrics of `namespace` (of every namespace: `None`) over the window ending with
    /// the store's current minute; operations `unknown` for longer than `stuck_after` are
    /// stuck.
    async fn metrics(
        &self,
        namespace: Option<&Namespace>,
        window: &MetricsWindow,
        stuck_after: TimeDelta,
    ) -> Result<MetricsReport, StoreError>;

    /// One row per namespace (only `namespace` when given) and tool: what happened in the
    /// window and what waits now.
    async fn tool_metrics(
        &self,
        namespace: Option<&Namespace>,
        window: &MetricsWindow,
        stuck_after: TimeDelta,
    ) -> Result<ToolsReport, StoreError>;

    /// One roll-up round (see [`next_rollup`]); returns how many minutes it folded. Several
    /// processes may run it at once: each minute is folded once.
    async fn roll_up(&self) -> Result<u64, StoreError>;
}

/// Why metrics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// 400 `invalid_window`.
    #[error(transparent)]
    InvalidWindow(#[from] WindowError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The asked window, or 24 hours.
fn parse_window(window: Option<&str>) -> Result<MetricsWindow, WindowError> {
    Ok(window
        .map(MetricsWindow::try_from)
        .transpose()?
        .unwrap_or_default())
}

/// Reads metrics and keeps the roll-up going. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    store: Arc<dyn MetricsStore>,
    stuck_after: TimeDelta,
}

impl Metrics {
    /// The service over a store.
    pub fn new(store: Arc<dyn MetricsStore>) -> Self {
        Self {
            store,
            stuck_after: DEFAULT_STUCK_AFTER,
        }
    }

    /// The same service, with operations `unknown` for longer than `stuck_after` stuck.
    pub fn with_stuck_after(mut self, stuck_after: TimeDelta) -> Self {
        self.stuck_after = stuck_after;
        self
    }

    /// How long an operation may be `unknown` before it counts as stuck.
    pub fn stuck_after(&self) -> TimeDelta {
        self.stuck_after
    }

    /// The metrics over `window` (default 24h) of one namespace, or of all (`None`).
    #[tracing::instrument(skip(self))]
    pub async fn read(
        &self,
        namespace: Option<&Namespace>,
        window: Option<&str>,
    ) -> Result<MetricsReport, MetricsError> {
        let window = parse_window(window)?;
        Ok(self
            .store
            .metrics(namespace, &window, self.stuck_after)
            .await?)
    }

    /// Where the trouble is over `window` (default 24h), by namespace and tool.
    #[tracing::instrument(skip(self))]
    pub async fn read_tools(
        &self,
        namespace: Option<&Namespace>,
        window: Option<&str>,
    ) -> Result<ToolsReport, MetricsError> {
        let window = parse_window(window)?;
        Ok(self
            .store
            .tool_metrics(namespace, &window, self.stuck_after)
            .await?)
    }

    /// The answer for a scope with no activity at all (every count 0, every bucket present).
    pub fn empty(&self, window: Option<&str>) -> Result<MetricsReport, MetricsError> {
        let plan = SeriesPlan::new(parse_window(window)?, Utc::now(), self.stuck_after);
        Ok(assemble(&plan, &[], &[], &[], Gauges::default()))
    }

    /// Rolls up every settled minute; returns how many were folded.
    pub async fn roll_up(&self) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let folded = self.store.roll_up().await?;
            total += folded;
            if folded < ROLLUP_CHUNK_MINUTES.unsigned_abs() {
                return Ok(total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_folds_the_settled_minutes_after_the_watermark_an_hour_at_most() {
        let now = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        let current = unix_minute(now);
        assert_eq!(
            next_rollup(current - 10, now),
            Some(current - 10..current - 2)
        );
        assert_eq!(
            next_rollup(current - 3, now),
            Some(current - 3..current - 2)
        );
        assert_eq!(next_rollup(current - 2, now), None);
        assert_eq!(next_rollup(current + 5, now), None);
        assert_eq!(next_rollup(0, now), Some(0..60));
    }
}
