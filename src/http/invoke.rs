//! `POST /v1/tools/{name}/invoke`: the ledger runs the tool itself. Same body and statuses as
//! a claim; a claim that starts an attempt is executed by idem, and answered `201` with the
//! operation as the call left it (`succeeded`, `failed`, or `unknown` after a timeout).

use app::domain::{IdempotencyKey, ToolName};
use app::ledger::Invoked;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use std::time::Duration;

use super::auth::AgentCaller;
use super::error::{ApiError, ApiResult, ErrorBody};

use super::json::AppJson;
use super::operations::{actor, claim_response, prefer_wait, sent_claim, ClaimBody, OperationBody};
use crate::startup::AppState;

/// The claim body with the path's tool filled in; a different body `tool` is refused (a
/// `null` one counts as absent, as for the claim's other optional fields).
fn claim_body(tool: &str, mut body: Map<String, Value>) -> ApiResult<ClaimBody> {
    // As a claim's body `tool` would be: a bad name is a bad request, not an unknown route.
    ToolName::try_from(tool).map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
    match body.get("tool") {
        None | Some(Value::Null) => {
            body.insert("tool".into(), Value::String(tool.to_owned()));
        }
        Some(Value::String(named)) if named == tool => {}
        Some(_) => {
            return Err(ApiError::bad_request(
                "tool_mismatch",
                format!("the body's tool must be absent or equal to the path's tool {tool:?}"),
            ))
        }
    }
    serde_json::from_value(Value::Object(body)).map_err(|error| {
        ApiError::bad_request(
            "invalid_request",
            format!("the body does not match the expected shape: {error}"),
        )
    })
}

/// The claim body of `POST /v1/operations`, with `tool` optional: the path names it.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads a map and checks `tool` itself
struct InvokeBody {
    /// Equal to the path's tool if present.
    #[schema(value_type = Option<ToolName>)]
    tool: Option<String>,
    /// Any JSON object, nested at most 64 deep.
    #[schema(value_type = Object)]
    args: Value,
    #[schema(value_type = Option<IdempotencyKey>)]
    key: Option<String>,
    #[schema(value_type = Option<IdempotencyKey>)]
    business_key: Option<String>,
    run_id: Option<String>,
    step: Option<u64>,
}

/// Runs a tool through idem: claims the key, calls `executor.url` with the key as
/// `Idempotency-Key`, and records the outcome; a repeat is answered like a claim.
#[utoipa::path(
    post,
    path = "/v1/tools/{name}/invoke",
    tag = "tools",
    security(("api_key" = [])),
    params(
        ("name" = ToolName, Path, description = "The tool"),
        ("Idempotency-Key" = Option<String>, Header, nullable = false,
            description = "As for `POST /v1/operations`"),
        ("Prefer" = Option<String>, Header, nullable = false,
            description = "`wait=N`, as for `POST /v1/operations`"),
    ),
    request_body(content = InvokeBody,
        description = "The claim body of `POST /v1/operations`; `tool` may be left out"),
    responses(
        (status = 201, body = OperationBody,
            description = "idem ran the tool now: the operation is `succeeded`, `failed` \
                (`retryable` says whether a retry may run it) or `unknown` (timeout or dropped \
                connection: reconciliation settles it)"),
        (status = 200, description = "Replayed, as for a claim"),
        (status = 202, body = OperationBody, description = "Waits for approval, as for a claim"),
        (status = 400, body = ErrorBody,
            description = "As for a claim, plus `tool_not_executable` (the tool has no \
                `executor`) and `tool_mismatch`"),
        (status = 409, body = ErrorBody,
            description = "`operation_in_progress` or `operation_outcome_unknown`, as for a claim"),
        (status = 422, body = ErrorBody, description = "`idempotency_key_reused`"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace(), tool = ?name))]
pub(crate) async fn invoke(
    State(state): State<AppState>,
    agent: AgentCaller,
    Path(name): Path<String>,
    headers: HeaderMap,
    AppJson(body): AppJson<Map<String, Value>>,
) -> ApiResult<Response> {
    let request = sent_claim(&headers, claim_body(&name, body)?)?;
    let wait = prefer_wait(&headers);
    let _waiting = match wait {
        Some(_) => Some(state.admission.admit_wait(agent.0.key_id)?),
        None => None,
    };
    let invoked = state
        .ledger
        .invoke(
            agent.namespace(),
            &actor(&agent),
            request,
            wait.map(Duration::from_secs),
        )
        .await?;
    let mut response = match invoked {
        Invoked::Executed(operation) => (
            StatusCode::CREATED,
            AppJson(OperationBody {
                operation: &operation,
            }),
        )
            .into_response(),
        Invoked::Answered(claim) => claim_response(claim),
    };
    if let Some(wait) = wait {
        let applied = HeaderValue::from_str(&format!("wait={wait}"))
            .expect("digits are a valid header value");
        response.headers_mut().insert("preference-applied", applied);
    }
    Ok(response)
}
