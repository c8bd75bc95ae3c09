//! The metrics roll-up: folds the counted events of each past minute into per-minute counts
//! (`event_minutes`), off the claim path, so `GET /v1/metrics` stays fast at millions of
//! events. Requests read the minutes not folded yet from the events themselves, so a slow or
//! stopped roll-up makes metrics slower, never wrong.

use app::ledger::metrics::Metrics;
use std::time::Duration;

use super::{stopped, StopSignal};

/// The roll-up of one process. On PostgreSQL several processes run it at once; the store
/// locks the watermark, so each minute is folded once.
#[derive(Clone)]
pub struct MetricsRollup {
    metrics: Metrics,
    interval: Duration,
}

impl MetricsRollup {
    /// A roll-up that looks every `interval`.
    pub fn new(metrics: Metrics, interval: Duration) -> Self {
        Self { metrics, interval }
    }

    /// Folds every minute that is due; returns how many.
    pub async fn run_once(&self) -> u64 {
        match self.metrics.roll_up().await {
            Ok(minutes) => minutes,
            Err(error) => {
                tracing::warn!(%error, "metrics roll-up failed; retrying next round");
                0
            }
        }
    }

    /// Runs rounds until the stop signal fires.
    pub async fn run(self, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        loop {
            let minutes = self.run_once().await;
            if minutes > 0 {
                tracing::debug!(minutes, "metrics rolled up");
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}
