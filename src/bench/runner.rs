//! The load loop: N tasks, each repeating one step until the time is up, every latency in
//! an HDR histogram.

use async_trait::async_trait;
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a step did not end as its scenario expects.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("unexpected answer {status}: {body}")]
    Answer { status: u16, body: String },
    #[error("store: {0}")]
    Store(#[from] app::store_error::StoreError),
    #[error("unexpected outcome: {0}")]
    Outcome(String),
}

/// One kind of load: a step is one unit of the scenario's throughput.
#[async_trait]
pub trait Workload: Send + Sync {
    /// Does one step; `task` and `seq` make keys unique without coordination.
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError>;
}

/// What a run measured.
pub struct Measurement {
    /// Steps that ended as expected (only these count towards throughput).
    pub ok: u64,
    pub errors: u64,
    /// From the start until the last task finished its last step.
    pub elapsed: Duration,
    /// Latency of the successful steps, in microseconds.
    pub latency: Histogram<u64>,
    /// The first error, to show why a row has errors.
    pub first_error: Option<String>,
}

impl Measurement {
    /// Successful steps per second.
    pub fn throughput(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.ok as f64 / seconds
        } else {
            0.0
        }
    }

    /// A latency percentile (0–100) in milliseconds.
    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        self.latency.value_at_percentile(percentile) as f64 / 1000.0
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes, 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// Runs `concurrency` tasks of the workload for `duration`. A step begun before the end is
/// finished and counted, so the counts match what the database holds.
pub async fn run_for(
    workload: Arc<dyn Workload>,
    concurrency: usize,
    duration: Duration,
) -> Measurement {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| tokio::spawn(task_loop(workload.clone(), task, deadline)))
        .collect();
    let mut total = Measurement {
        ok: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        first_error: None,
    };
    for task in tasks {
        let part = task.await.expect("a bench task panicked");
        total.ok += part.ok;
        total.errors += part.errors;
        total
            .latency
            .add(&part.latency)
            .expect("histograms of equal bounds add");
        total.first_error = total.first_error.or(part.first_error);
    }
    total.elapsed = started.elapsed();
    total
}

async fn task_loop(workload: Arc<dyn Workload>, task: usize, deadline: Instant) -> Measurement {
    let mut part = Measurement {
        ok: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        first_error: None,
    };
    let mut seq = 0;
    while Instant::now() < deadline {
        let begun = Instant::now();
        match workload.step(task, seq).await {
            Ok(()) => {
                let micros = begun.elapsed().as_micros().max(1);
                part.latency.saturating_record(micros as u64);
                part.ok += 1;
            }
            Err(error) => {
                part.errors += 1;
                part.first_error.get_or_insert_with(|| error.to_string());
            }
        }
        seq += 1;
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Succeeds on even steps, fails on odd ones, and counts every call.
    struct Alternating(AtomicU64);

    #[async_trait]
    impl Workload for Alternating {
        async fn step(&self, _task: usize, seq: u64) -> Result<(), StepError> {
            self.0.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(1)).await;
            if seq.is_multiple_of(2) {
                Ok(())
            } else {
                Err(StepError::Outcome("odd".into()))
            }
        }
    }

    #[tokio::test]
    async fn every_step_is_counted_once_as_a_success_or_an_error() {
        let workload = Arc::new(Alternating(AtomicU64::new(0)));
        let measured = run_for(workload.clone(), 3, Duration::from_millis(200)).await;
        let calls = workload.0.load(Ordering::Relaxed);
        assert!(measured.ok > 0);
        assert_eq!(measured.ok + measured.errors, calls);
        assert_eq!(measured.latency.len(), measured.ok);
        assert_eq!(
            measured.first_error.as_deref(),
            Some("unexpected outcome: odd")
        );
        assert!(measured.percentile_ms(50.0) >= 1.0);
    }
}
