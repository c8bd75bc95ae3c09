//! Background loops. Each runs until its stop signal fires and is started by
//! `Application::run_until`; each can also be driven one round at a time by tests.

mod alerts;
mod approval_webhook;
mod lease_reaper;
mod metrics_rollup;
mod reconciler;
mod retention;
mod supervisor;
mod webhook;

pub use alerts::{AlertWatch, Thresholds};
pub use approval_webhook::{ApprovalWebhook, WebhookQueue};
pub use lease_reaper::LeaseReaper;
pub use metrics_rollup::MetricsRollup;
pub use reconciler::Reconciler;
pub use retention::{Retention, RETENTION_BATCH};
pub use supervisor::{panic_message, spawn_supervised, WorkerHealth};
pub use webhook::Webhook;

use tokio::sync::watch;

/// Tells workers to stop; cloned into each.
pub type StopSignal = watch::Receiver<bool>;

/// Waits until the stop signal fires (or its sender is gone).
pub async fn stopped(mut stop: StopSignal) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}
