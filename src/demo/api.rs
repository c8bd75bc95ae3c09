//! The demo agent's view of the world: idem's own REST API over loopback, with its API key,
//! and the sandbox provider's fault injection.

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::StatusCode;
use serde_json::Value;
use std::time::Duration;

/// What went wrong talking to idem or the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer (connection refused, timeout, a body that is not JSON).
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// An answer the agent did not expect at this step.
    #[error("{step}: unexpected {status}: {body}")]
    Unexpected {
        step: &'static str,
        status: StatusCode,
        body: Value,
    },
    /// The key cannot be sent as a header.
    #[error("the API key is not a valid header value")]
    BadKey,
}

/// An answer: its status and JSON body (`null` when it had none).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    /// The operation's id and status, if the body holds an operation.
    pub fn operation(&self) -> (&str, &str) {
        let operation = &self.body["operation"];
        (
            operation["id"].as_str().unwrap_or_default(),
            operation["status"].as_str().unwrap_or_default(),
        )
    }

    /// The error code, if the body is an error.
    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    /// `Unexpected`, for a step that did not get the answer it needs.
    pub fn unexpected(self, step: &'static str) -> CallError {
        CallError::Unexpected {
            step,
            status: self.status,
            body: self.body,
        }
    }
}

/// idem's REST API as the demo agent calls it.
#[derive(Clone)]
pub struct AgentApi {
    http: reqwest::Client,
    base: String,
}

impl AgentApi {
    /// A client of idem at `base` (`http://host:port`) holding the API key.
    pub fn new(base: String, key: &str) -> Result<Self, CallError> {
        let mut bearer =
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| CallError::BadKey)?;
        bearer.set_sensitive(true);
        let headers = HeaderMap::from_iter([(AUTHORIZATION, bearer)]);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self { http, base })
    }

    /// `POST /v1/operations`.
    pub async fn claim(&self, body: &Value) -> Result<Reply, CallError> {
        self.post("/v1/operations", body).await
    }

    /// `POST /v1/tools/{tool}/invoke`.
    pub async fn invoke(&self, tool: &str, body: &Value) -> Result<Reply, CallError> {
        self.post(&format!("/v1/tools/{tool}/invoke"), body).await
    }

    /// `POST /v1/operations/{id}/complete`.
    pub async fn complete(&self, id: &str, body: &Value) -> Result<Reply, CallError> {
        self.post(&format!("/v1/operations/{id}/complete"), body)
            .await
    }

    /// How many operations of `tool` wait for a person, counting up to `limit`.
    pub async fn awaiting_approval(&self, tool: &str, limit: usize) -> Result<usize, CallError> {
        let path = format!("/v1/operations?status=awaiting_approval&tool={tool}&limit={limit}");
        let reply = answer(self.http.get(format!("{}{path}", self.base))).await?;
        if !reply.status.is_success() {
            return Err(reply.unexpected("list awaiting approval"));
        }
        Ok(reply.body["operations"].as_array().map_or(0, Vec::len))
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Reply, CallError> {
        answer(self.http.post(format!("{}{path}", self.base)).json(body)).await
    }
}

/// The sandbox provider's fault injection (`POST /_faults`).
#[derive(Clone)]
pub struct Faults {
    http: reqwest::Client,
    url: String,
}

impl Faults {
    /// Fault injection of the sandbox at `sandbox` (`http://host:port`).
    pub fn new(sandbox: &str) -> Result<Self, CallError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        Ok(Self {
            http,
            url: format!("{sandbox}/_faults"),
        })
    }

    /// Queues a fault (`{"fault", "key", …}`).
    pub async fn queue(&self, fault: &Value) -> Result<(), CallError> {
        let reply = answer(self.http.post(&self.url).json(fault)).await?;
        if reply.status != StatusCode::CREATED {
            return Err(reply.unexpected("queue a fault"));
        }
        Ok(())
    }
}

async fn answer(request: reqwest::RequestBuilder) -> Result<Reply, CallError> {
    let response = request.send().await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Reply { status, body })
}
