//! Supervision: a background worker that panics is logged and started again, with a growing
//! pause between attempts, and is reported down (so `/readyz` answers 503) until a restart
//! has run for a while without panicking.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{stopped, StopSignal};

/// The pause before the first restart; it doubles with each panic in a row.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between restarts of a worker that keeps panicking.
const LONGEST_PAUSE: Duration = Duration::from_secs(10);
/// How long a restarted worker must run without panicking to count as up again.
const UP_AFTER: Duration = Duration::from_secs(1);

/// Which of the process's background tasks are down now. Cheap to clone.
#[derive(Clone, Default)]
pub struct WorkerHealth(Arc<Mutex<BTreeSet<&'static str>>>);

impl WorkerHealth {
    /// The names of the tasks that are down, in name order.
    pub fn down(&self) -> Vec<&'static str> {
        self.lock().iter().copied().collect()
    }

    /// Records that `name` is down (`true`) or up again.
    pub fn set_down(&self, name: &'static str, down: bool) {
        let mut names = self.lock();
        if down {
            names.insert(name);
        } else {
            names.remove(name);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<&'static str>> {
        // The set is valid after any panic: each change is one insert or remove.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Spawns [`supervise`] on a task of its own.
pub fn spawn_supervised<W>(
    name: &'static str,
    health: &WorkerHealth,
    stop: &StopSignal,
    start: impl Fn(StopSignal) -> W + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    W: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(supervise(name, health.clone(), stop.clone(), start))
}

/// Runs the worker that `start` makes until it returns (it stops when the stop signal it is
/// given fires); each time it panics instead, makes and runs a new one after a pause.
async fn supervise<W>(
    name: &'static str,
    health: WorkerHealth,
    stop: StopSignal,
    start: impl Fn(StopSignal) -> W,
) where
    W: Future<Output = ()> + Send + 'static,
{
    let mut pause = FIRST_PAUSE;
    loop {
        let mut task = tokio::spawn(start(stop.clone()));
        let mut up_timer = std::pin::pin!(tokio::time::sleep(UP_AFTER));
        let mut counted_up = false;
        let ended = loop {
            tokio::select! {
                ended = &mut task => break ended,
                () = &mut up_timer, if !counted_up => {
                    counted_up = true;
                    pause = FIRST_PAUSE;
                    health.set_down(name, false);
                }
            }
        };
        match ended {
            Ok(()) => return,
            Err(error) if error.is_panic() => {
                let message = panic_message(error.into_panic());
                health.set_down(name, true);
                tracing::error!(
                    worker = name,
                    panic = %message,
                    pause_ms = pause.as_millis() as u64,
                    "a background worker panicked; restarting it after a pause"
                );
            }
            // Cancelled: the runtime is shutting down.
            Err(_) => return,
        }
        tokio::select! {
            () = stopped(stop.clone()) => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
        tracing::info!(worker = name, "restarting a background worker");
    }
}

/// What a panic said, when it said it with a string.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(text) => (*text).to_owned(),
            Err(_) => "a panic without a message".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_worker_that_panics_is_down_until_a_restart_has_run_a_while() {
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        let health = WorkerHealth::default();
        let starts = Arc::new(AtomicUsize::new(0));
        let supervised = spawn_supervised("flaky", &health, &stop, {
            let starts = starts.clone();
            move |stop| {
                let start = starts.fetch_add(1, Ordering::SeqCst);
                async move {
                    if start < 2 {
                        panic!("round {start} failed");
                    }
                    stopped(stop).await;
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(health.down(), vec!["flaky"], "down after the first panic");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "restarted twice");
        assert_eq!(
            health.down(),
            vec!["flaky"],
            "not up before it has run a while"
        );
        tokio::time::sleep(UP_AFTER).await;
        assert!(health.down().is_empty(), "up once the restart held");
        stop_sender.send(true).unwrap();
        supervised.await.unwrap();
        assert_eq!(
            starts.load(Ordering::SeqCst),
            3,
            "a stopped worker is not restarted"
        );
    }

    #[test]
    fn a_panic_message_is_read_from_either_string_type() {
        assert_eq!(panic_message(Box::new("static")), "static");
        assert_eq!(panic_message(Box::new(String::from("owned"))), "owned");
        assert_eq!(panic_message(Box::new(7)), "a panic without a message");
    }
}
