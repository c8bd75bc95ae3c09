//! `/v1/operations`: the agent API (claim, complete, unknown) and reads.

use app::domain::{Namespace, OperationStatus, Permission, ToolName};
use app::ledger::{
    BeginRequest, Claim, Event, Lease, LedgerError, Operation, OperationFilter, Report,
};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;
use uuid::Uuid;

use super::auth::{AgentCaller, Caller};
use super::error::{error_body, ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use crate::startup::AppState;

/// The operation routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/operations", post(claim).get(list))
        .route("/v1/operations/{id}", get(read))
        .route("/v1/operations/{id}/events", get(events))
        .route("/v1/operations/{id}/complete", post(complete))
        .route("/v1/operations/{id}/unknown", post(unknown))
}

impl From<LedgerError> for ApiError {
    fn from(error: LedgerError) -> Self {
        match error {
            LedgerError::Invalid { code, message } => ApiError::bad_request(code, message),
            LedgerError::NotFound => ApiError::NotFound("no such operation"),
            LedgerError::Refused(refused) => {
                let code = match refused {
                    app::ledger::ReportRefused::AlreadyFinal { .. } => "operation_already_final",
                    app::ledger::ReportRefused::LeaseLost => "lease_lost",
                };
                ApiError::Conflict {
                    code,
                    message: refused.to_string(),
                }
            }
            LedgerError::Store(inner) => inner.into(),
        }
    }
}

/// What an agent is about to do. The key is, first match wins: the `Idempotency-Key` header,
/// `key`, `business_key`, the tool's `key_fields`, else derived from `run_id` and `step`.
#[derive(Deserialize, utoipa::ToSchema)]
struct ClaimBody {
    #[schema(value_type = ToolName)]
    tool: String,
    /// Any JSON object, nested at most 64 deep.
    #[schema(value_type = Object)]
    args: Value,
    #[serde(default)]
    #[schema(value_type = Option<app::domain::IdempotencyKey>)]
    key: Option<String>,
    #[serde(default)]
    business_key: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    step: Option<u64>,
}

/// `{"operation": Op}`.
#[derive(Serialize, utoipa::ToSchema)]
struct OperationBody<'a> {
    operation: &'a Operation,
}

fn header_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(value) => value.to_str().map(|key| Some(key.to_owned())).map_err(|_| {
            ApiError::bad_request(
                "invalid_idempotency_key",
                "the Idempotency-Key header must be printable ASCII",
            )
        }),
    }
}

fn actor(agent: &AgentCaller) -> String {
    format!("agent:{}/{}", agent.0.namespace, agent.0.key_name)
}

/// `{"operation", "lease"}`: the caller must now execute the tool, then report.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: `claim_response` answers with `json!`
struct StartedBody {
    operation: Operation,
    lease: Lease,
}

/// `{"operation", "replayed": true, "note"}`: the stored outcome, and no new action taken.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: `claim_response` answers with `json!`
struct ReplayedBody {
    operation: Operation,
    #[schema(example = true)]
    replayed: bool,
    /// What happened before, e.g. `already completed at step 4 at <time>; no new action taken`.
    note: String,
}

/// Begins an operation (claim), or answers what became of the earlier one with the same key.
#[utoipa::path(
    post,
    path = "/v1/operations",
    tag = "operations",
    security(("api_key" = [])),
    params(
        ("Idempotency-Key" = Option<String>, Header, nullable = false,
            min_length = 1, max_length = 255,
            description = "The key, 1 to 255 printable ASCII characters; wins over the body's \
                `key`, and must equal it if both are given"),
        ("Prefer" = Option<String>, Header, nullable = false,
            description = "`wait=N` (N ≤ 60; more is 60): a claim that finds the operation \
                `pending` or `awaiting_approval` waits until it settles or N seconds pass, then \
                answers for the state it ends in, with `Preference-Applied: wait=N`"),
    ),
    request_body = ClaimBody,
    responses(
        (status = 201, body = StartedBody,
            description = "Started: a new key, an `approved` operation, a retryable `failed` \
                one, a lease taken over, or a key past its `expires_at` (a brand-new \
                operation). The caller must now execute the tool."),
        (status = 202, body = OperationBody,
            description = "The operation waits for a person's approval \
                (`status: awaiting_approval`)"),
        (status = 200, body = ReplayedBody,
            description = "Replayed: same key and fingerprint, and a final outcome stored \
                (`succeeded`, permanent `failed`, `rejected`); no new action taken",
            headers(("idempotent-replayed" = String, description = "`true`"))),
        (status = 409, body = ErrorBody,
            description = "`operation_in_progress` (running under a live lease) or \
                `operation_outcome_unknown` (do not retry: reconciliation decides); \
                `details.operation` is the Op",
            headers(("retry-after" = u64,
                description = "Seconds until the lease runs out (`operation_in_progress`)"))),
        (status = 422, body = ErrorBody,
            description = "`idempotency_key_reused`: same key, different fingerprint; `details` \
                has `stored_fingerprint`, `requested_fingerprint` and `operation_id`"),
        (status = 400, body = ErrorBody,
            description = "Nothing stored: `malformed_json`, `invalid_request`, `invalid_args`, \
                `json_too_deep`, `invalid_tool_name`, `invalid_idempotency_key`, \
                `missing_idempotency_key`, `conflicting_idempotency_keys` or `missing_key_field`"),
        (status = 413, body = ErrorBody,
            description = "`payload_too_large`: the body is over the limit (default 1 MiB); \
                nothing stored"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no API key, or an invalid or revoked one"),
        (status = 415, body = ErrorBody,
            description = "`unsupported_media_type`: the body is not declared as JSON"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace()))]
async fn claim(
    State(state): State<AppState>,
    agent: AgentCaller,
    headers: HeaderMap,
    AppJson(body): AppJson<ClaimBody>,
) -> ApiResult<Response> {
    let request = BeginRequest {
        tool: body.tool,
        args: body.args,
        header_key: header_key(&headers)?,
        body_key: body.key,
        business_key: body.business_key,
        run_id: body.run_id,
        step: body.step,
    };
    let Some(wait) = prefer_wait(&headers) else {
        let claim = state
            .ledger
            .begin(agent.namespace(), &actor(&agent), request)
            .await?;
        return Ok(claim_response(claim));
    };
    let claim = state
        .ledger
        .begin_waiting(
            agent.namespace(),
            &actor(&agent),
            request,
            Duration::from_secs(wait),
        )
        .await?;
    let mut response = claim_response(claim);
    let applied =
        HeaderValue::from_str(&format!("wait={wait}")).expect("digits are a valid header value");
    response.headers_mut().insert("preference-applied", applied);
    Ok(response)
}

/// The longest a claim may be held (`Prefer: wait=N`, N ≤ 60).
const MAX_WAIT_SECONDS: u64 = 60;

/// The `wait` preference of RFC 7240, capped at 60 seconds; other preferences and
/// malformed values are ignored, as the RFC asks.
fn prefer_wait(headers: &HeaderMap) -> Option<u64> {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split([',', ';']))
        .filter_map(|preference| {
            let (name, value) = preference.split_once('=')?;
            let is_wait = name.trim().eq_ignore_ascii_case("wait");
            is_wait
                .then(|| value.trim().trim_matches('"').parse::<u64>().ok())
                .flatten()
        })
        .next()
        .map(|seconds| seconds.min(MAX_WAIT_SECONDS))
}

/// The contract's answer for each outcome of a claim.
fn claim_response(claim: Claim) -> Response {
    match claim {
        Claim::Started { operation, lease } => {
            let body = json!({ "operation": operation, "lease": { "token": lease.token, "expires_at": lease.expires_at } });
            (StatusCode::CREATED, AppJson(body)).into_response()
        }
        Claim::AwaitingApproval { operation } => (
            StatusCode::ACCEPTED,
            AppJson(OperationBody {
                operation: &operation,
            }),
        )
            .into_response(),
        Claim::Replayed { operation, note } => {
            let body = json!({ "operation": operation, "replayed": true, "note": note });
            let headers = [("idempotent-replayed", HeaderValue::from_static("true"))];
            (StatusCode::OK, headers, AppJson(body)).into_response()
        }
        Claim::InProgress {
            operation,
            retry_after_seconds,
            note,
        } => {
            let body = error_body(
                "operation_in_progress",
                &note,
                json!({ "operation": operation }),
            );
            let headers = [("retry-after", HeaderValue::from(retry_after_seconds))];
            (StatusCode::CONFLICT, headers, AppJson(body)).into_response()
        }
        Claim::OutcomeUnknown { operation, note } => {
            let body = error_body(
                "operation_outcome_unknown",
                &note,
                json!({ "operation": operation }),
            );
            (StatusCode::CONFLICT, AppJson(body)).into_response()
        }
        Claim::KeyReused {
            operation,
            requested,
        } => {
            let message = "this key was already used with different arguments; use a new key for a new action";
            let details = json!({
                "stored_fingerprint": operation.fingerprint,
                "requested_fingerprint": requested,
                "operation_id": operation.id,
            });
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                AppJson(error_body("idempotency_key_reused", message, details)),
            )
                .into_response()
        }
    }
}

fn operation_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound("no such operation"))
}

/// Agents see their own namespace; people with read permission see all.
fn visible_namespace(caller: &Caller) -> ApiResult<Option<&app::domain::Namespace>> {
    match caller {
        Caller::Agent(agent) => Ok(Some(agent.namespace())),
        Caller::Person(person) => person.require(Permission::Read).map(|()| None),
    }
}

/// One operation.
#[utoipa::path(
    get,
    path = "/v1/operations/{id}",
    operation_id = "read_operation",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    responses(
        (status = 200, body = OperationBody, description = "The operation"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no credentials, or an invalid or revoked API key"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation (or not in the agent's namespace)"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let operation = state
        .ledger
        .operation(visible_namespace(&caller)?, operation_id(&id)?)
        .await?;
    Ok(AppJson(OperationBody {
        operation: &operation,
    })
    .into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListParams {
    #[param(value_type = Option<OperationStatus>)]
    status: Option<String>,
    #[param(value_type = Option<ToolName>)]
    tool: Option<String>,
    run_id: Option<String>,
    /// For an agent, another namespace than its own lists as empty.
    #[param(value_type = Option<Namespace>)]
    namespace: Option<String>,
    /// 1 to 200, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page; opaque.
    cursor: Option<String>,
}

/// A page of operations, newest first.
#[derive(Serialize, utoipa::ToSchema)]
struct ListBody {
    operations: Vec<Operation>,
    next_cursor: Option<String>,
}

/// Cursors are opaque to clients; the prefix lets the format change without breaking links.
const CURSOR_PREFIX: &str = "c1_";

fn parse_list(params: ListParams) -> ApiResult<(OperationFilter, u32)> {
    let invalid = |code: &'static str, message: &str| ApiError::bad_request(code, message);
    let limit = match params.limit.as_deref() {
        None => 50,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=200).contains(n))
            .ok_or_else(|| {
                invalid(
                    "invalid_limit",
                    "limit must be a whole number from 1 to 200",
                )
            })?,
    };
    let before = match params.cursor.as_deref() {
        None | Some("") => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|id| Uuid::try_parse(id).ok())
                .ok_or_else(|| {
                    invalid("invalid_cursor", "cursor is not one this server gave out")
                })?,
        ),
    };
    let filter = OperationFilter {
        namespace: params
            .namespace
            .map(Namespace::try_from)
            .transpose()
            .map_err(|e| invalid("invalid_namespace", &e.to_string()))?,
        status: params
            .status
            .map(|s| s.parse::<OperationStatus>())
            .transpose()
            .map_err(|e| invalid("invalid_status", &e.to_string()))?,
        tool: params
            .tool
            .map(ToolName::try_from)
            .transpose()
            .map_err(|e| invalid(e.code(), &e.to_string()))?,
        run_id: params.run_id,
        before,
    };
    Ok((filter, limit))
}

/// Operations, newest first (by creation), keyset-paginated.
#[utoipa::path(
    get,
    path = "/v1/operations",
    operation_id = "list_operations",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(ListParams),
    responses(
        (status = 200, body = ListBody,
            description = "A page of operations; `next_cursor` is null on the last page"),
        (status = 400, body = ErrorBody,
            description = "`invalid_limit`, `invalid_cursor`, `invalid_status`, \
                `invalid_tool_name` or `invalid_namespace`"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no credentials, or an invalid or revoked API key"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<AppJson<ListBody>> {
    let (mut filter, limit) = parse_list(params)?;
    if let Caller::Agent(agent) = &caller {
        if filter
            .namespace
            .as_ref()
            .is_some_and(|asked| asked != agent.namespace())
        {
            // Another namespace lists as empty, exactly like one with no operations.
            return Ok(AppJson(ListBody {
                operations: Vec::new(),
                next_cursor: None,
            }));
        }
        filter.namespace = Some(agent.namespace().clone());
    }
    visible_namespace(&caller)?;
    let (operations, more) = state.ledger.list(&filter, limit).await?;
    let next_cursor = more
        .then(|| {
            operations
                .last()
                .map(|op| format!("{CURSOR_PREFIX}{}", op.id.simple()))
        })
        .flatten();
    Ok(AppJson(ListBody {
        operations,
        next_cursor,
    }))
}

/// The audit trail, oldest first.
#[derive(Serialize, utoipa::ToSchema)]
struct EventsBody {
    events: Vec<Event>,
}

/// The audit trail of an operation, oldest first.
#[utoipa::path(
    get,
    path = "/v1/operations/{id}/events",
    operation_id = "list_events",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    responses(
        (status = 200, body = EventsBody, description = "The events"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no credentials, or an invalid or revoked API key"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation (or not in the agent's namespace)"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<AppJson<EventsBody>> {
    let events = state
        .ledger
        .events(visible_namespace(&caller)?, operation_id(&id)?)
        .await?;
    Ok(AppJson(EventsBody { events }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Succeeded,
    Failed,
}

#[derive(Deserialize, utoipa::ToSchema)]
struct ErrorInfo {
    code: String,
    message: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
struct CompleteBody {
    lease_token: String,
    outcome: Outcome,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ErrorInfo>,
    #[serde(default)]
    retryable: bool,
    #[serde(default)]
    provider_ref: Option<String>,
}

fn error_value(error: Option<ErrorInfo>) -> Option<Value> {
    error.map(|e| json!({ "code": e.code, "message": e.message }))
}

/// Reports the outcome of an execution, with the lease token of the claim.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/complete",
    tag = "operations",
    security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body = CompleteBody,
    responses(
        (status = 200, body = OperationBody,
            description = "The final operation; repeating the same completion (same token and \
                outcome) answers 200 again"),
        (status = 400, body = ErrorBody, description = "`malformed_json` or `invalid_request`"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no API key, or an invalid or revoked one"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation in the agent's namespace"),
        (status = 409, body = ErrorBody,
            description = "`operation_already_final` (another report on a final operation) or \
                `lease_lost` (a wrong or expired token on one that is not final)"),
        (status = 413, body = ErrorBody, description = "`payload_too_large`"),
        (status = 415, body = ErrorBody,
            description = "`unsupported_media_type`: the body is not declared as JSON"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace(), operation = %id))]
async fn complete(
    State(state): State<AppState>,
    agent: AgentCaller,
    Path(id): Path<String>,
    AppJson(body): AppJson<CompleteBody>,
) -> ApiResult<Response> {
    let report = Report::Completed {
        succeeded: matches!(body.outcome, Outcome::Succeeded),
        result: body.result,
        error: error_value(body.error),
        retryable: body.retryable,
        provider_ref: body.provider_ref,
    };
    let operation = state
        .ledger
        .report(
            agent.namespace(),
            operation_id(&id)?,
            &body.lease_token,
            report,
            &actor(&agent),
        )
        .await?;
    Ok(AppJson(OperationBody {
        operation: &operation,
    })
    .into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct UnknownBody {
    lease_token: String,
    #[serde(default)]
    error: Option<ErrorInfo>,
}

/// Reports that the caller could not tell what happened (a timeout); reconciliation takes over.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/unknown",
    tag = "operations",
    security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body = UnknownBody,
    responses(
        (status = 200, body = OperationBody,
            description = "The operation, now `unknown`; repeating the same report with the same \
                token answers 200 again"),
        (status = 400, body = ErrorBody, description = "`malformed_json` or `invalid_request`"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no API key, or an invalid or revoked one"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation in the agent's namespace"),
        (status = 409, body = ErrorBody,
            description = "`operation_already_final` (another report on a final operation) or \
                `lease_lost` (a wrong or expired token on one that is not final)"),
        (status = 413, body = ErrorBody, description = "`payload_too_large`"),
        (status = 415, body = ErrorBody,
            description = "`unsupported_media_type`: the body is not declared as JSON"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace(), operation = %id))]
async fn unknown(
    State(state): State<AppState>,
    agent: AgentCaller,
    Path(id): Path<String>,
    AppJson(body): AppJson<UnknownBody>,
) -> ApiResult<Response> {
    let report = Report::Unknown {
        error: error_value(body.error),
    };
    let operation = state
        .ledger
        .report(
            agent.namespace(),
            operation_id(&id)?,
            &body.lease_token,
            report,
            &actor(&agent),
        )
        .await?;
    Ok(AppJson(OperationBody {
        operation: &operation,
    })
    .into_response())
}
