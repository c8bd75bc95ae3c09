//! People's verdicts on operations that wait for approval: `approve` and `reject`
//! (approvers and admins only).

use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;

use super::{operation_answer, ActionOn, OperationBody};
use crate::http::auth::Approver;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::json::OptionalJson;
use crate::startup::AppState;

/// Why the person approved, if they say.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct VerdictBody {
    #[serde(default)]
    reason: Option<String>,
}

/// Why the person rejected: required, the agent is told it.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct RejectBody {
    /// At least one character that is not white space.
    #[serde(default)]
    #[schema(required = true, value_type = String, pattern = r"\S")]
    reason: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/operations/{id}/approve",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body(content = VerdictBody, description = "An optional reason"),
    responses(
        (status = 200, body = OperationBody, description = "The operation, now `approved`"),
        (status = 403, body = ErrorBody, description = "`forbidden`: approvers and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody, description = "`operation_not_awaiting_approval`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %action.by.person.username, operation = %action.id))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    action: ActionOn<Approver>,
    OptionalJson(body): OptionalJson<VerdictBody>,
) -> ApiResult<Response> {
    let operation = state
        .people_actions
        .approve(&action.by, action.id, body.reason)
        .await?;
    Ok(operation_answer(&operation))
}

/// Rejects an operation waiting for approval, for good; every later claim with its key is
/// answered with the approver's name and reason.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/reject",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body(content = RejectBody, description = "The reason, required"),
    responses(
        (status = 200, body = OperationBody, description = "The operation, now `rejected`"),
        (status = 400, body = ErrorBody, description = "`missing_reason`, `malformed_json` or `invalid_request`"),
        (status = 403, body = ErrorBody, description = "`forbidden`: approvers and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody, description = "`operation_not_awaiting_approval`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %action.by.person.username, operation = %action.id))]
pub(crate) async fn reject(
    State(state): State<AppState>,
    action: ActionOn<Approver>,
    OptionalJson(body): OptionalJson<RejectBody>,
) -> ApiResult<Response> {
    let operation = state
        .people_actions
        .reject(&action.by, action.id, body.reason)
        .await?;
    Ok(operation_answer(&operation))
}
