//! Background loops. Each runs until its stop signal fires and is started by
//! `Application::run_until`; each can also be driven one round at a time by tests.

mod lease_reaper;
mod reconciler;

pub use lease_reaper::LeaseReaper;
pub use reconciler::Reconciler;

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
