//! One `tools/call` through the ledger: claim, then forward only when idem says act, then
//! report what happened. Every other answer becomes a tool result the model can read.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, Request, ServerResult,
};
use rmcp::service::{RequestContext, RoleServer, ServiceError};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

use super::answers;
use super::ledger_client::{Claim, ClaimAnswer, LedgerClient, Report};
use super::relay::Relay;

/// How long the proxy waits, and for what.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Wait this long for a person's decision instead of answering "awaiting approval".
    pub approval_wait: Option<Duration>,
    /// Wait this long (≤ 60 s) for a duplicate's first call to finish.
    pub in_progress_wait_seconds: u64,
    /// An upstream call that takes longer has an unknown outcome.
    pub upstream_timeout: Duration,
}

/// The ledger in front of the upstream's tools.
pub struct Gate {
    ledger: LedgerClient,
    options: GateOptions,
}

/// What the upstream did with a forwarded call.
enum Forwarded {
    Answered(CallToolResponse),
    Refused(McpError),
    /// Nobody knows: a timeout, a dropped connection, or the host cancelled while it ran.
    Lost(String),
    /// The host cancelled before the call was sent: nothing was done.
    NotSent,
}

impl Gate {
    pub fn new(ledger: LedgerClient, options: GateOptions) -> Self {
        Self { ledger, options }
    }

    /// Runs the call at most as often as idem allows and answers the model. `host` is the
    /// host's request: its `_meta` and progress token go upstream, and its cancellation
    /// stops the proxy waiting (a claim already made is still answered and reported).
    pub async fn call(
        &self,
        upstream: &Relay,
        claim: Claim,
        params: CallToolRequestParams,
        host: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let approval_deadline = self.options.approval_wait.map(|d| Instant::now() + d);
        let mut wait = None;
        let mut waited_for_duplicate = false;
        loop {
            let answer = match self.ledger.claim(&claim, wait).await {
                Ok(answer) => answer,
                Err(unreachable) => return Ok(answers::not_done(&unreachable.to_string()).into()),
            };
            let cancelled = host.ct.is_cancelled();
            let result = match answer {
                ClaimAnswer::Act {
                    operation,
                    lease_token,
                } => {
                    let id = operation["id"].as_str().unwrap_or_default();
                    return self.act(upstream, id, &lease_token, params, host).await;
                }
                ClaimAnswer::Replay { operation, note } => answers::replay(&operation, &note),
                ClaimAnswer::AwaitingApproval { operation } => {
                    match seconds_left(approval_deadline).filter(|_| !cancelled) {
                        Some(seconds) => {
                            // A claim that is not held (the server answered at once) must
                            // not turn this into a busy loop.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            wait = Some(seconds.min(60));
                            continue;
                        }
                        None => answers::awaiting_approval(&operation),
                    }
                }
                ClaimAnswer::InProgress if !waited_for_duplicate && !cancelled => {
                    waited_for_duplicate = true;
                    wait = Some(self.options.in_progress_wait_seconds);
                    continue;
                }
                ClaimAnswer::InProgress => answers::still_running(),
                ClaimAnswer::OutcomeUnknown => {
                    answers::outcome_unknown("an earlier attempt of this call")
                }
                ClaimAnswer::KeyReused { message } => answers::key_reused(&message),
                ClaimAnswer::Refused { status, message } => {
                    answers::not_done(&format!("{status} {message}"))
                }
            };
            return Ok(result.into());
        }
    }

    /// The proxy holds the lease: call the upstream once, then tell idem what happened.
    async fn act(
        &self,
        upstream: &Relay,
        operation_id: &str,
        lease_token: &str,
        params: CallToolRequestParams,
        host: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let forwarded = if host.ct.is_cancelled() {
            Forwarded::NotSent
        } else {
            self.forward(upstream, params, host).await
        };
        let (report, answer) = match forwarded {
            Forwarded::Answered(CallToolResponse::Complete(result)) => {
                let stored = serde_json::to_value(&result).unwrap_or(Value::Null);
                let report = if result.is_error == Some(true) {
                    Report::Failed {
                        result: stored,
                        code: "tool_error",
                        message: first_text(&result),
                    }
                } else {
                    Report::Succeeded { result: stored }
                };
                (report, Ok(result.into()))
            }
            Forwarded::Answered(other) => {
                let why = "the upstream answered with a task or a request for input";
                (unknown(why), Ok(other))
            }
            Forwarded::Refused(error) => {
                let report = Report::Failed {
                    result: Value::Null,
                    code: "mcp_error",
                    message: format!("{}: {}", error.code.0, error.message),
                };
                (report, Err(error))
            }
            Forwarded::Lost(why) => {
                let answer = Ok(answers::outcome_unknown(&why).into());
                (unknown(&why), answer)
            }
            Forwarded::NotSent => {
                let why = "the host cancelled the call before it was forwarded";
                let report = Report::NotAttempted {
                    code: "cancelled_by_host",
                    message: why.to_owned(),
                };
                (report, Ok(answers::not_done(why).into()))
            }
        };
        if let Err(unreachable) = self.ledger.report(operation_id, lease_token, report).await {
            // The tool has acted; its answer goes back even if idem did not hear of it (the
            // lease runs out and idem marks the operation unknown, never runs it again).
            eprintln!(
                "idem mcp-proxy: warning: could not report operation {operation_id}: {unreachable}"
            );
        }
        answer
    }

    async fn forward(
        &self,
        upstream: &Relay,
        params: CallToolRequestParams,
        host: &RequestContext<RoleServer>,
    ) -> Forwarded {
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let call =
            tokio::time::timeout(self.options.upstream_timeout, upstream.send(request, host));
        match call.await {
            Ok(Ok(ServerResult::CallToolResult(result))) => {
                Forwarded::Answered(CallToolResponse::Complete(result))
            }
            Ok(Ok(ServerResult::InputRequiredResult(asks))) => {
                Forwarded::Answered(CallToolResponse::InputRequired(asks))
            }
            Ok(Ok(ServerResult::CreateTaskResult(task))) => {
                Forwarded::Answered(CallToolResponse::Task(task))
            }
            // An answer without content decodes as an empty one.
            Ok(Ok(ServerResult::EmptyResult(_))) => {
                Forwarded::Answered(CallToolResponse::Complete(CallToolResult::default()))
            }
            Ok(Ok(_)) => {
                Forwarded::Lost("the upstream answered something else than a tool result".into())
            }
            Ok(Err(ServiceError::McpError(error))) => Forwarded::Refused(error),
            // The upstream was told to stop, but may have acted already.
            Ok(Err(ServiceError::Cancelled { .. })) => Forwarded::Lost(
                "the host cancelled the call while it ran; the upstream was told to stop".into(),
            ),
            Ok(Err(error)) => Forwarded::Lost(format!("the upstream connection failed: {error}")),
            Err(_) => Forwarded::Lost(format!(
                "the upstream did not answer within {} s",
                self.options.upstream_timeout.as_secs_f64()
            )),
        }
    }
}

fn unknown(why: &str) -> Report<'static> {
    Report::Unknown {
        code: "upstream_outcome_unknown",
        message: why.to_owned(),
    }
}

/// Whole seconds until the deadline, if any remain.
fn seconds_left(deadline: Option<Instant>) -> Option<u64> {
    let left = deadline?.checked_duration_since(Instant::now())?;
    (left.as_secs() >= 1).then_some(left.as_secs())
}

/// The first text of a result: what an error says.
fn first_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .unwrap_or_else(|| json!(result.structured_content).to_string())
}
