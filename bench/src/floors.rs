//! The floors: idem's claim and completion straight through the store (no HTTP), and a
//! minimal axum JSON endpoint (the HTTP stack with no work behind it).

use app::domain::{Fingerprint, IdempotencyKey, KeySource, Namespace, ToolName, ToolPolicy};
use app::ledger::{Claim, ClaimRequest, Fresh, LedgerStore, Report, Runner};
use async_trait::async_trait;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::load_client::LoadClient;
use super::runner::{StepError, Workload};

const ACTOR: &str = "agent:bench/floor";

/// Claim + complete of a new key through `LedgerStore`: the transactions idem commits for
/// one operation, without HTTP, JSON or authentication.
pub struct StoreFloor {
    store: Arc<dyn LedgerStore>,
    namespace: Namespace,
    tool: ToolName,
    args: Value,
    fingerprint: Fingerprint,
    /// Unique per run, so keys never meet earlier runs' keys.
    prefix: String,
}

impl StoreFloor {
    /// A floor on this store whose keys start with a fresh prefix.
    pub fn new(store: Arc<dyn LedgerStore>) -> Self {
        let tool = ToolName::try_from("bench.charge").expect("a valid tool name");
        let args = json!({ "amount_cents": 500 });
        Self {
            store,
            namespace: Namespace::try_from("bench").expect("a valid namespace"),
            fingerprint: Fingerprint::compute(&tool, &args, &[]),
            tool,
            args,
            prefix: Uuid::new_v4().simple().to_string(),
        }
    }

    fn request(&self, task: usize, seq: u64) -> Result<ClaimRequest, StepError> {
        let key = format!("{}-{task}-{seq}", self.prefix);
        Ok(ClaimRequest {
            namespace: self.namespace.clone(),
            key: IdempotencyKey::try_from(key).map_err(|e| StepError::Outcome(e.to_string()))?,
            key_source: KeySource::Body,
            tool: self.tool.clone(),
            policy: ToolPolicy::default_for_unregistered(),
            fingerprint: self.fingerprint.clone(),
            args: self.args.clone(),
            run_id: None,
            step: None,
            runner: Runner::Agent,
        })
    }
}

#[async_trait]
impl Workload for StoreFloor {
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError> {
        let request = self.request(task, seq)?;
        let fresh = Fresh {
            operation_id: Uuid::now_v7(),
            lease_token: app::identity::random_token(),
        };
        let claimed = self.store.claim(&request, ACTOR, fresh).await?;
        let (operation, token) = match claimed.outcome {
            Claim::Started { operation, lease } => (operation, lease.token),
            other => return Err(StepError::Outcome(format!("claim: {other:?}"))),
        };
        let success = Report::Completed {
            succeeded: true,
            result: Some(json!({ "ok": true })),
            error: None,
            retryable: false,
            provider_ref: None,
        };
        let reported = self
            .store
            .report(&self.namespace, operation.id, &token, &success, ACTOR)
            .await?;
        match reported.map(|decision| decision.outcome) {
            Some(Ok(_)) => Ok(()),
            other => Err(StepError::Outcome(format!("complete: {other:?}"))),
        }
    }
}

/// A minimal axum server answering `POST /hello` with JSON, on a free loopback port.
pub struct HelloServer {
    pub base: String,
    shutdown: Option<oneshot::Sender<()>>,
}

impl HelloServer {
    /// Starts it in this process.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let router = Router::new().route("/hello", post(hello));
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await;
        });
        Ok(Self {
            base,
            shutdown: Some(shutdown),
        })
    }
}

impl Drop for HelloServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn hello(Json(body): Json<Value>) -> Json<Value> {
    Json(json!({ "hello": body["name"] }))
}

/// One JSON request and answer to the hello server.
pub struct HelloWorkload {
    pub client: LoadClient,
}

#[async_trait]
impl Workload for HelloWorkload {
    async fn step(&self, _task: usize, _seq: u64) -> Result<(), StepError> {
        let body = br#"{"name":"bench"}"#.to_vec();
        let answer = self.client.post_json("/hello", body, &[]).await?;
        if answer.status == 200 {
            Ok(())
        } else {
            let body = String::from_utf8_lossy(&answer.body).into_owned();
            Err(StepError::Answer {
                status: answer.status,
                body,
            })
        }
    }
}
