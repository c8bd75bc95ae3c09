//! The proxy's side of idem's REST API: an agent with an API key, like any other client.
//! It keeps no ledger rules of its own; the answers say what to do.

use reqwest::{header, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// What a claim answered, as the contract's table names it.
#[derive(Debug)]
pub enum ClaimAnswer {
    /// `201`: the proxy holds the lease and must now call the tool.
    Act {
        operation: Value,
        lease_token: String,
    },
    /// `200`: the stored outcome, and the note to give the model.
    Replay { operation: Value, note: String },
    /// `202`: a person must approve first.
    AwaitingApproval { operation: Value },
    /// `409 operation_in_progress`: another call holds the lease.
    InProgress,
    /// `409 operation_outcome_unknown`: nobody knows what happened; never retry.
    OutcomeUnknown,
    /// `422 idempotency_key_reused`: the same key with other arguments.
    KeyReused { message: String },
    /// Any other answer: nothing was done.
    Refused { status: u16, message: String },
}

/// What the proxy asks for: the tool, its arguments and where the key comes from.
#[derive(Debug, Clone)]
pub struct Claim {
    pub tool: String,
    pub args: Value,
    pub key: Option<String>,
    pub run_id: String,
    pub step: u64,
}

/// The final word of one attempt.
pub enum Report<'a> {
    Succeeded {
        result: Value,
    },
    Failed {
        result: Value,
        code: &'a str,
        message: String,
    },
    Unknown {
        code: &'a str,
        message: String,
    },
    /// The proxy held the lease but never sent the call: a failure a later call may retry.
    NotAttempted {
        code: &'a str,
        message: String,
    },
}

/// An HTTP client of one idem server, holding one API key.
#[derive(Clone)]
pub struct LedgerClient {
    http: reqwest::Client,
    base: String,
    bearer: String,
}

/// idem could not be reached or answered something unreadable.
#[derive(Debug, thiserror::Error)]
#[error("idem at {base} could not be reached: {source}")]
pub struct Unreachable {
    base: String,
    source: reqwest::Error,
}

impl LedgerClient {
    /// A client of the idem server at `base` (`http://host:port`).
    pub fn new(base: &str, api_key: &str) -> Self {
        let http = reqwest::Client::builder()
            // A claim may be held up to 60 s by `Prefer: wait`.
            .timeout(Duration::from_secs(90))
            .build()
            .expect("a reqwest client builds");
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            bearer: format!("Bearer {api_key}"),
        }
    }

    fn unreachable(&self, source: reqwest::Error) -> Unreachable {
        Unreachable {
            base: self.base.clone(),
            source,
        }
    }

    /// `POST /v1/operations`, holding the request up to `wait` seconds when the operation is
    /// running or awaiting approval (`Prefer: wait=N`, N ≤ 60).
    pub async fn claim(
        &self,
        claim: &Claim,
        wait: Option<u64>,
    ) -> Result<ClaimAnswer, Unreachable> {
        let mut body = json!({ "tool": claim.tool, "args": claim.args,
                               "run_id": claim.run_id, "step": claim.step });
        if let Some(key) = &claim.key {
            body["key"] = json!(key);
        }
        let mut request = self
            .http
            .post(format!("{}/v1/operations", self.base))
            .header(header::AUTHORIZATION, &self.bearer)
            .json(&body);
        if let Some(seconds) = wait {
            request = request.header("Prefer", format!("wait={}", seconds.clamp(1, 60)));
        }
        let response = request.send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| self.unreachable(e))?;
        Ok(read_claim_answer(status, body))
    }

    /// `complete` or `unknown` for the operation the lease belongs to; the answer's
    /// `operation`.
    pub async fn report(
        &self,
        operation_id: &str,
        lease_token: &str,
        report: Report<'_>,
    ) -> Result<Value, Unreachable> {
        let (path, body) = match report {
            Report::Succeeded { result } => (
                "complete",
                json!({ "lease_token": lease_token, "outcome": "succeeded", "result": result }),
            ),
            Report::Failed {
                result,
                code,
                message,
            } => (
                "complete",
                json!({ "lease_token": lease_token, "outcome": "failed", "result": result,
                        "error": { "code": code, "message": message }, "retryable": false }),
            ),
            Report::NotAttempted { code, message } => (
                "complete",
                json!({ "lease_token": lease_token, "outcome": "failed", "result": Value::Null,
                        "error": { "code": code, "message": message }, "retryable": true }),
            ),
            Report::Unknown { code, message } => (
                "unknown",
                json!({ "lease_token": lease_token, "error": { "code": code, "message": message } }),
            ),
        };
        let response = self
            .http
            .post(format!("{}/v1/operations/{operation_id}/{path}", self.base))
            .header(header::AUTHORIZATION, &self.bearer)
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let body: Value = response.json().await.map_err(|e| self.unreachable(e))?;
        Ok(body.get("operation").cloned().unwrap_or(body))
    }

    /// Whether the tool is in idem's registry (`GET /v1/tools/{name}` → `registered`).
    pub async fn is_registered(&self, tool: &str) -> Result<bool, Unreachable> {
        let response = self
            .http
            .get(format!("{}/v1/tools/{tool}", self.base))
            .header(header::AUTHORIZATION, &self.bearer)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let body: Value = response.json().await.map_err(|e| self.unreachable(e))?;
        Ok(body["registered"].as_bool().unwrap_or(false))
    }
}

fn read_claim_answer(status: StatusCode, mut body: Value) -> ClaimAnswer {
    let operation = body["operation"].take();
    let code = body["error"]["code"].as_str().unwrap_or_default();
    match status.as_u16() {
        201 => ClaimAnswer::Act {
            lease_token: body["lease"]["token"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            operation,
        },
        200 => ClaimAnswer::Replay {
            note: body["note"].as_str().unwrap_or_default().to_owned(),
            operation,
        },
        202 => ClaimAnswer::AwaitingApproval { operation },
        409 if code == "operation_in_progress" => ClaimAnswer::InProgress,
        409 if code == "operation_outcome_unknown" => ClaimAnswer::OutcomeUnknown,
        422 if code == "idempotency_key_reused" => ClaimAnswer::KeyReused {
            message: error_message(&body),
        },
        status => ClaimAnswer::Refused {
            status,
            message: error_message(&body),
        },
    }
}

fn error_message(body: &Value) -> String {
    let error = &body["error"];
    format!(
        "{}: {}",
        error["code"].as_str().unwrap_or("error"),
        error["message"].as_str().unwrap_or_default()
    )
}
