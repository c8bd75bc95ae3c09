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
    #[error("HTTP: {0}")]
    Load(#[from] crate::load_client::LoadError),
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
#[derive(Clone)]
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

impl From<&Measurement> for super::report::RunResult {
    fn from(measured: &Measurement) -> Self {
        Self {
            throughput: measured.throughput(),
            p50_ms: measured.percentile_ms(50.0),
            p99_ms: measured.percentile_ms(99.0),
            errors: measured.errors,
        }
    }
}

/// An empty latency histogram: 1 µs to 10 minutes, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
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
    let mut total = empty_measurement();
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

/// Starts steps at a fixed `rate` per second for `duration`, whatever the answers take (an
/// open loop, as independent agents arrive), with at most `max_in_flight` steps running.
/// Each latency counts from the step's scheduled start, so time spent queued behind a slow
/// server counts too (no coordinated omission). Waits for the steps begun to finish.
pub async fn run_at_rate(
    workload: Arc<dyn Workload>,
    rate: f64,
    max_in_flight: usize,
    duration: Duration,
) -> Measurement {
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let slots = Arc::new(tokio::sync::Semaphore::new(max_in_flight));
    let mut steps = Vec::new();
    let mut seq = 0u64;
    loop {
        let scheduled = started + interval.mul_f64(seq as f64);
        if scheduled >= started + duration {
            break;
        }
        tokio::time::sleep_until(scheduled.into()).await;
        let slot = slots.clone().acquire_owned().await.expect("never closed");
        let workload = workload.clone();
        steps.push(tokio::spawn(async move {
            let result = workload.step(0, seq).await;
            drop(slot);
            (result, scheduled.elapsed())
        }));
        seq += 1;
    }
    let mut total = empty_measurement();
    for step in steps {
        match step.await.expect("a bench step panicked") {
            (Ok(()), took) => {
                let micros = took.as_micros().max(1);
                total.latency.saturating_record(micros as u64);
                total.ok += 1;
            }
            (Err(error), _) => {
                total.errors += 1;
                total.first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    total.elapsed = started.elapsed();
    total
}

fn empty_measurement() -> Measurement {
    Measurement {
        ok: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        first_error: None,
    }
}

async fn task_loop(workload: Arc<dyn Workload>, task: usize, deadline: Instant) -> Measurement {
    let mut part = empty_measurement();
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

    #[tokio::test]
    async fn an_open_loop_starts_steps_at_the_rate_and_counts_queueing_in_latency() {
        let workload = Arc::new(Alternating(AtomicU64::new(0)));
        let measured = run_at_rate(workload.clone(), 200.0, 4, Duration::from_millis(500)).await;
        let calls = workload.0.load(Ordering::Relaxed);
        assert_eq!(calls, 100, "200/s for half a second");
        assert_eq!(measured.ok + measured.errors, calls);

        // One slot for steps of at least 1 ms at 2,000/s: they queue, and the wait counts.
        let workload = Arc::new(Alternating(AtomicU64::new(0)));
        let queued = run_at_rate(workload, 2000.0, 1, Duration::from_millis(100)).await;
        assert!(
            queued.percentile_ms(99.0) > 20.0,
            "the last steps waited behind the first: p99 {} ms",
            queued.percentile_ms(99.0)
        );
    }
}
