//! idem itself, started in this process on a free loopback port, and the HTTP workloads
//! that an agent's calls make of it.

use async_trait::async_trait;
use clap::Parser;
use hdrhistogram::Histogram;
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::load_client::{LoadClient, LoadError};
use super::runner::{StepError, Workload};
use super::scenario::{MixedStep, Scenario};
use ::idem::config::ServeConfig;
use ::idem::startup::Application;

/// How many completed keys the replay scenarios cycle through.
const REPLAY_KEYS: usize = 64;

/// `idem serve`'s own defaults, so the bench measures what is deployed.
#[derive(Parser)]
struct ServeDefaults {
    #[command(flatten)]
    serve: ServeConfig,
}

/// A running idem with an API key of namespace `bench`, stopped by [`IdemServer::stop`].
pub struct IdemServer {
    pub base: String,
    api_key: String,
    shutdown: oneshot::Sender<()>,
    running: JoinHandle<std::io::Result<()>>,
}

impl IdemServer {
    /// Builds idem on the database with the served defaults, except port 0 and no per-key
    /// rate limit (the bench is one key sending as fast as it can).
    pub async fn start(database_url: &str) -> anyhow::Result<Self> {
        let args = [
            "idem",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--rate-limit-per-second",
            "0",
        ];
        let config = ServeDefaults::try_parse_from(args)?.serve;
        let application = Application::build(config).await?;
        let base = format!("http://{}", application.local_addr());
        let namespace = "bench".try_into()?;
        let (_, secret) = application
            .state()
            .identity
            .create_api_key(namespace, Some("bench".into()))
            .await?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(application.run_until(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            base,
            api_key: secret.expose().to_owned(),
            shutdown,
            running,
        })
    }

    /// The `Authorization` header's value that carries the API key.
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.api_key)
    }

    /// Where an agent reaches this server, with its API key.
    pub fn endpoint(&self) -> Result<Endpoint, LoadError> {
        Endpoint::new(&self.base, &self.authorization())
    }

    /// Stops the server and waits until it has drained and closed its database.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let _ = self.running.await;
    }
}

/// One idem server as an agent reaches it: a client sending the API key with each request.
#[derive(Clone)]
pub struct Endpoint {
    client: Arc<LoadClient>,
}

impl Endpoint {
    /// A client of the server at `base` sending `authorization` (`Bearer …`).
    pub fn new(base: &str, authorization: &str) -> Result<Self, LoadError> {
        let headers =
            HeaderMap::from_iter([(AUTHORIZATION, HeaderValue::from_str(authorization)?)]);
        Ok(Self {
            client: Arc::new(LoadClient::new(base, headers)?),
        })
    }

    async fn post(&self, path: &str, body: &impl Serialize) -> Result<(u16, Bytes), StepError> {
        let body = serde_json::to_vec(body).map_err(|e| StepError::Outcome(e.to_string()))?;
        let answer = self.client.post_json(path, body, &[]).await?;
        Ok((answer.status, answer.body))
    }
}

/// One agent's view of idem: claims, completions, replays and duplicates over HTTP.
pub struct IdemHttp {
    scenario: Scenario,
    /// The servers of one ledger; task `t` sends all its requests to `endpoints[t % len]`.
    endpoints: Vec<Endpoint>,
    /// Unique per run, so new keys never meet earlier runs' keys.
    prefix: String,
    /// Keys completed before the run, for replays.
    completed: Vec<String>,
    /// A key claimed before the run and left pending, for duplicates.
    pending: String,
    /// Each claim's own latency in microseconds, half of a claim+complete step (kept only
    /// for `IdemNewHalfPeak`, whose target is about claims).
    claim_latency: Option<Mutex<Histogram<u64>>>,
}

/// A claim's body; the same tool and arguments for every key, so a replay's fingerprint
/// matches.
#[derive(Serialize)]
struct Claim<'a> {
    tool: &'static str,
    args: ChargeArgs,
    key: &'a str,
}

#[derive(Serialize)]
struct ChargeArgs {
    amount_cents: u32,
}

impl<'a> Claim<'a> {
    fn of(key: &'a str) -> Self {
        Self {
            tool: "bench.charge",
            args: ChargeArgs { amount_cents: 500 },
            key,
        }
    }
}

/// A successful completion's body.
#[derive(Serialize)]
struct Completion<'a> {
    lease_token: &'a str,
    outcome: &'static str,
    result: Completed,
}

#[derive(Serialize)]
struct Completed {
    ok: bool,
}

/// What a completion needs of a 201: the operation's id and the lease's token.
#[derive(Deserialize)]
struct Started<'a> {
    #[serde(borrow)]
    operation: StartedOperation<'a>,
    #[serde(borrow)]
    lease: StartedLease<'a>,
}

#[derive(Deserialize)]
struct StartedOperation<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct StartedLease<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
}

impl IdemHttp {
    /// Prepares a scenario: completes the keys replays need and claims the key duplicates
    /// hit (its lease, 30 s by default, outlasts a run of at most 20 s).
    pub async fn prepare(server: &IdemServer, scenario: Scenario) -> Result<Self, StepError> {
        Self::prepare_on(vec![server.endpoint()?], scenario).await
    }

    /// Prepares a scenario on the servers of one ledger (at least one), the tasks spread
    /// evenly over them; the set-up goes through the first.
    pub async fn prepare_on(
        endpoints: Vec<Endpoint>,
        scenario: Scenario,
    ) -> Result<Self, StepError> {
        assert!(!endpoints.is_empty(), "a workload needs a server");
        let prefix = Uuid::new_v4().simple().to_string();
        let mut workload = Self {
            scenario,
            endpoints,
            pending: format!("{prefix}-pending"),
            prefix,
            completed: Vec::new(),
            claim_latency: (scenario == Scenario::IdemNewHalfPeak)
                .then(|| Mutex::new(super::runner::histogram())),
        };
        if matches!(scenario, Scenario::IdemReplay | Scenario::IdemMixed) {
            for index in 0..REPLAY_KEYS {
                let key = format!("{}-done-{index}", workload.prefix);
                workload.claim_and_complete(0, &key).await?;
                workload.completed.push(key);
            }
        }
        if matches!(scenario, Scenario::IdemDuplicateStorm | Scenario::IdemMixed) {
            let (status, body) = workload.claim(0, &workload.pending).await?;
            expect(status, 201, &body)?;
        }
        Ok(workload)
    }

    /// wrk's load of the same completed keys (`<prefix>-done-<i>`), at `base`.
    pub fn wrk_target(&self, base: &str, authorization: Option<String>) -> crate::wrk::Target {
        crate::wrk::Target {
            base: base.to_owned(),
            load: crate::wrk::Load::IdemReplay,
            prefix: self.prefix.clone(),
            authorization,
            completed_keys: self.completed.len(),
        }
    }

    fn endpoint(&self, task: usize) -> &Endpoint {
        &self.endpoints[task % self.endpoints.len()]
    }

    async fn claim(&self, task: usize, key: &str) -> Result<(u16, Bytes), StepError> {
        self.endpoint(task)
            .post("/v1/operations", &Claim::of(key))
            .await
    }

    /// The claims' latencies so far (`IdemNewHalfPeak` only).
    pub fn claim_latency(&self) -> Option<Histogram<u64>> {
        let latency = self.claim_latency.as_ref()?;
        Some(latency.lock().expect("latency lock").clone())
    }

    async fn claim_and_complete(&self, task: usize, key: &str) -> Result<(), StepError> {
        let begun = Instant::now();
        let (status, body) = self.claim(task, key).await?;
        expect(status, 201, &body)?;
        if let Some(latency) = &self.claim_latency {
            let micros = begun.elapsed().as_micros().max(1) as u64;
            latency
                .lock()
                .expect("latency lock")
                .saturating_record(micros);
        }
        let started: Started =
            serde_json::from_slice(&body).map_err(|e| StepError::Outcome(e.to_string()))?;
        let completion = Completion {
            lease_token: &started.lease.token,
            outcome: "succeeded",
            result: Completed { ok: true },
        };
        let path = format!("/v1/operations/{}/complete", started.operation.id);
        let (status, body) = self.endpoint(task).post(&path, &completion).await?;
        expect(status, 200, &body)
    }

    async fn replay(&self, task: usize, seq: u64) -> Result<(), StepError> {
        let key = crate::replay_key(&self.completed, task, seq)?;
        let (status, body) = self.claim(task, key).await?;
        expect(status, 200, &body)
    }

    async fn duplicate(&self, task: usize) -> Result<(), StepError> {
        let (status, body) = self.claim(task, &self.pending).await?;
        expect(status, 409, &body)?;
        if contains(&body, b"operation_in_progress") {
            Ok(())
        } else {
            Err(answer(status, &body))
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

fn expect(status: u16, wanted: u16, body: &[u8]) -> Result<(), StepError> {
    if status == wanted {
        Ok(())
    } else {
        Err(answer(status, body))
    }
}

fn answer(status: u16, body: &[u8]) -> StepError {
    StepError::Answer {
        status,
        body: String::from_utf8_lossy(body).chars().take(300).collect(),
    }
}

#[async_trait]
impl Workload for IdemHttp {
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError> {
        let new_key = || format!("{}-{task}-{seq}", self.prefix);
        match self.scenario {
            Scenario::IdemNew
            | Scenario::IdemNewHalfPeak
            | Scenario::IdemClaimHalfPeak
            | Scenario::IdemNewOneProcess
            | Scenario::IdemNewTwoProcesses => self.claim_and_complete(task, &new_key()).await,
            Scenario::IdemReplay => self.replay(task, seq).await,
            Scenario::IdemDuplicateStorm => self.duplicate(task).await,
            Scenario::IdemMixed => match MixedStep::pick(rand::random_range(0..100)) {
                MixedStep::New => self.claim_and_complete(task, &new_key()).await,
                MixedStep::Replay => self.replay(task, seq).await,
                MixedStep::Duplicate => self.duplicate(task).await,
            },
            other => Err(StepError::Outcome(format!(
                "{other:?} is not an idem scenario"
            ))),
        }
    }
}
