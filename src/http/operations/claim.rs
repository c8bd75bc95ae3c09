//! `POST /v1/operations`: the claim, and the contract's answer for each outcome.

use app::domain::ToolName;
use app::ledger::{Claim, Lease, Operation, SentClaim};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

use super::{actor, OperationBody};
use crate::http::auth::AgentCaller;
use crate::http::error::{error_body, ApiError, ApiResult, ErrorBody};
use crate::http::json::AppJson;
use crate::startup::AppState;

/// What an agent is about to do. The key is, first match wins: the `Idempotency-Key` header,
/// `key`, `business_key`, the tool's `key_fields`, else derived from `run_id` and `step`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ClaimBody {
    /// Required here; for `invoke` optional, and equal to the path's tool if present.
    #[schema(value_type = ToolName)]
    tool: String,
    /// Any JSON object, nested at most 64 deep.
    #[schema(value_type = Object)]
    args: Value,
    #[serde(default)]
    #[schema(value_type = Option<app::domain::IdempotencyKey>)]
    key: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<app::domain::IdempotencyKey>)]
    business_key: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(
        default,
        deserialize_with = "app::domain::whole_number::option_u64_whole"
    )]
    step: Option<u64>,
}

fn header_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(value) => value.to_str().map(|key| Some(unquoted(key))).map_err(|_| {
            ApiError::bad_request(
                "invalid_idempotency_key",
                "the Idempotency-Key header must be printable ASCII",
            )
        }),
    }
}

/// The IETF draft writes the header as a structured-field string (`"8e03…"`), Stripe as the
/// bare key: a well-formed string is the key inside its quotes; anything else is the key as
/// it is.
fn unquoted(header: &str) -> String {
    let string = |item: sfv::Item| {
        let key = item.bare_item.as_string()?.as_str().to_owned();
        item.params.is_empty().then_some(key)
    };
    header
        .starts_with('"')
        .then(|| sfv::Parser::new(header).parse::<sfv::Item>().ok())
        .flatten()
        .and_then(string)
        .unwrap_or_else(|| header.to_owned())
}

/// `{"operation", "lease"}`: the caller must now execute the tool, then report. Serialized
/// straight from the operation (no JSON tree in between: this is the hot path).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct StartedBody {
    operation: Operation,
    lease: Lease,
}

/// `{"operation", "replayed": true, "note"}`: the stored outcome, and no new action taken.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ReplayedBody {
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
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace()))]
pub(crate) async fn claim(
    State(state): State<AppState>,
    agent: AgentCaller,
    headers: HeaderMap,
    AppJson(body): AppJson<ClaimBody>,
) -> ApiResult<Response> {
    let request = sent_claim(&headers, body)?;
    let Some(wait) = prefer_wait(&headers) else {
        let claim = state
            .ledger
            .claim(agent.namespace(), &actor(&agent), request)
            .await?;
        return Ok(claim_response(claim));
    };
    let _waiting = state.admission.admit_wait(agent.0.key_id)?;
    let claim = state
        .ledger
        .claim_waiting(
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

/// The ledger's request from the headers and the body.
pub(crate) fn sent_claim(headers: &HeaderMap, body: ClaimBody) -> ApiResult<SentClaim> {
    Ok(SentClaim {
        tool: body.tool,
        args: body.args,
        header_key: header_key(headers)?,
        body_key: body.key,
        business_key: body.business_key,
        run_id: body.run_id,
        step: body.step,
        runner: Default::default(),
    })
}

/// The longest a claim may be held (`Prefer: wait=N`, N ≤ 60).
const MAX_WAIT_SECONDS: u64 = 60;

/// The `wait` preference of RFC 7240, capped at 60 seconds; other preferences and
/// malformed values are ignored, as the RFC asks.
pub(crate) fn prefer_wait(headers: &HeaderMap) -> Option<u64> {
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
pub(crate) fn claim_response(claim: Claim) -> Response {
    match claim {
        Claim::Started { operation, lease } => {
            let body = StartedBody { operation, lease };
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
            let body = ReplayedBody {
                operation,
                replayed: true,
                note,
            };
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
