//! Operators settle what agents could not: `reconcile` (ask the provider now), `resolve`
//! (settle by hand) and `expire` (end the key's life now). Each is audited with who and why.

use app::domain::Outcome;
use app::people_actions::ResolveRequest;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::{operation_answer, ActionOn, OperationBody};
use crate::http::auth::Operator;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::json::{AppJson, OptionalJson};
use crate::startup::AppState;

/// Asks the tool's `reconcile_url` about an `unknown` operation now and settles it:
/// `succeeded` if the provider saw the key, `failed` with `retryable: true` if it did not.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/reconcile",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    responses(
        (status = 200, body = OperationBody, description = "The operation, settled by the provider's answer"),
        (status = 403, body = ErrorBody, description = "`forbidden`: operators and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody,
            description = "`operation_not_unknown` (only unknown operations are reconciled) or \
                `not_reconcilable` (the tool has no `reconcile_url`: resolve it by hand)"),
        (status = 502, body = ErrorBody,
            description = "`provider_unavailable`: the provider did not answer; the attempt is \
                recorded and the background reconciler asks again (`details.next_attempt_at`)"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %action.by.person.username, operation = %action.id))]
pub(crate) async fn reconcile(
    State(state): State<AppState>,
    action: ActionOn<Operator>,
) -> ApiResult<Response> {
    let operation = state
        .people_actions
        .reconcile(&action.by, action.id)
        .await?;
    Ok(operation_answer(&operation))
}

/// A manual settlement.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ResolveBody {
    /// `succeeded` or `failed`.
    #[schema(value_type = String, pattern = "^(succeeded|failed)$")]
    outcome: Outcome,
    /// For `succeeded`: what the tool returned, if known (any JSON).
    #[serde(default)]
    result: Option<Value>,
    /// For `failed`: `{"code", "message"}`; defaults to `resolved_by_operator` and the reason.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    error: Option<Value>,
    /// For `failed`: whether the next claim may run the action again (default false).
    #[serde(default)]
    retryable: bool,
    /// Why; required (at least one character that is not white space).
    #[serde(default)]
    #[schema(required = true, value_type = String, pattern = r"\S")]
    reason: Option<String>,
}

/// Settles a `pending` or `unknown` operation by hand: a manual intervention, audited with who
/// and why. Later claims with the key replay it like any final outcome.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/resolve",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body = ResolveBody,
    responses(
        (status = 200, body = OperationBody, description = "The operation, now `succeeded` or `failed`"),
        (status = 400, body = ErrorBody,
            description = "`missing_reason`, `invalid_request` or `malformed_json`"),
        (status = 403, body = ErrorBody, description = "`forbidden`: operators and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody,
            description = "`operation_already_final`, or `invalid_transition` (awaiting approval or approved)"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %action.by.person.username, operation = %action.id))]
pub(crate) async fn resolve(
    State(state): State<AppState>,
    action: ActionOn<Operator>,
    AppJson(body): AppJson<ResolveBody>,
) -> ApiResult<Response> {
    let request = ResolveRequest {
        outcome: body.outcome,
        result: body.result,
        error: body.error,
        retryable: body.retryable,
        reason: body.reason,
    };
    let operation = state
        .people_actions
        .resolve(&action.by, action.id, request)
        .await?;
    Ok(operation_answer(&operation))
}

/// Why the key's life ends now.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct ExpireBody {
    /// Why; required (at least one character that is not white space).
    #[serde(default)]
    #[schema(required = true, value_type = String, pattern = r"\S")]
    reason: Option<String>,
}

/// Ends the key's life now, so the next claim with it starts a new operation (the old one
/// stays in history). Refused while the outcome is open (`pending`, `unknown`): settle first.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/expire",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body = ExpireBody,
    responses(
        (status = 200, body = OperationBody, description = "The operation, its `expires_at` now"),
        (status = 400, body = ErrorBody,
            description = "`missing_reason`, `invalid_request` or `malformed_json`"),
        (status = 403, body = ErrorBody, description = "`forbidden`: operators and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody,
            description = "`invalid_transition`: the operation is `pending` or `unknown`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %action.by.person.username, operation = %action.id))]
pub(crate) async fn expire(
    State(state): State<AppState>,
    action: ActionOn<Operator>,
    OptionalJson(body): OptionalJson<ExpireBody>,
) -> ApiResult<Response> {
    let operation = state
        .people_actions
        .expire(&action.by, action.id, body.reason)
        .await?;
    Ok(operation_answer(&operation))
}
