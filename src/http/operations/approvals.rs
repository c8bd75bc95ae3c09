//! People's verdicts on operations that wait for approval: `approve` and `reject`
//! (approvers and admins only).

use app::audit::actions;
use app::ledger::Verdict;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{operation_id, OperationBody};
use crate::http::audit::ClientAddress;
use crate::http::auth::{Approver, Person};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::json::AppJson;
use crate::startup::AppState;

/// Why the person decided as they did; required to reject (the agent is told it).
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct VerdictBody {
    #[serde(default)]
    reason: Option<String>,
}

const MAX_REASON_CHARS: usize = 1000;

fn reason(body: VerdictBody, required: bool) -> ApiResult<Option<String>> {
    let reason = body
        .reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    match reason {
        None if required => Err(ApiError::bad_request(
            "missing_reason",
            "a rejection needs a reason: the agent is told it",
        )),
        Some(r) if r.chars().count() > MAX_REASON_CHARS => Err(ApiError::bad_request(
            "invalid_request",
            "reason is longer than 1000 characters",
        )),
        other => Ok(other),
    }
}

async fn decide(
    state: AppState,
    person: Person,
    address: ClientAddress,
    id: String,
    verdict: impl FnOnce() -> ApiResult<Verdict>,
) -> ApiResult<Response> {
    let id = operation_id(&id)?;
    let verdict = verdict()?;
    let (action, reason) = match &verdict {
        Verdict::Approve { reason } => (actions::OPERATION_APPROVED, reason.clone()),
        Verdict::Reject { reason } => (actions::OPERATION_REJECTED, Some(reason.clone())),
    };
    let operation = state
        .ledger
        .decide(id, verdict, person.0.username.as_str())
        .await?;
    let detail = json!({
        "reason": reason,
        "namespace": operation.namespace,
        "tool": operation.tool,
        "key": operation.key,
        "fingerprint": operation.fingerprint,
    });
    let subject = format!("operation:{id}");
    state
        .audit
        .record(person.did(address, action, subject, detail))
        .await;
    Ok(AppJson(OperationBody {
        operation: &operation,
    })
    .into_response())
}

/// Approves an operation waiting for approval: the next claim with the same key and the same
/// arguments takes the lease, once.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/approve",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body(content = VerdictBody, description = "An optional reason"),
    responses(
        (status = 200, body = OperationBody, description = "The operation, now `approved`"),
        (status = 400, body = ErrorBody, description = "`malformed_json` or `invalid_request`"),
        (status = 401, body = ErrorBody, description = "`unauthorized`: not signed in"),
        (status = 403, body = ErrorBody, description = "`forbidden`: approvers and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody, description = "`operation_not_awaiting_approval`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username, operation = %id))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    Approver(person): Approver,
    address: ClientAddress,
    Path(id): Path<String>,
    AppJson(body): AppJson<VerdictBody>,
) -> ApiResult<Response> {
    decide(state, person, address, id, || {
        Ok(Verdict::Approve {
            reason: reason(body, false)?,
        })
    })
    .await
}

/// Rejects an operation waiting for approval, for good; every later claim with its key is
/// answered with the approver's name and reason.
#[utoipa::path(
    post,
    path = "/v1/operations/{id}/reject",
    tag = "operations",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    request_body(content = VerdictBody, description = "The reason, required"),
    responses(
        (status = 200, body = OperationBody, description = "The operation, now `rejected`"),
        (status = 400, body = ErrorBody, description = "`missing_reason`, `malformed_json` or `invalid_request`"),
        (status = 401, body = ErrorBody, description = "`unauthorized`: not signed in"),
        (status = 403, body = ErrorBody, description = "`forbidden`: approvers and admins only"),
        (status = 404, body = ErrorBody, description = "`not_found`"),
        (status = 409, body = ErrorBody, description = "`operation_not_awaiting_approval`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username, operation = %id))]
pub(crate) async fn reject(
    State(state): State<AppState>,
    Approver(person): Approver,
    address: ClientAddress,
    Path(id): Path<String>,
    AppJson(body): AppJson<VerdictBody>,
) -> ApiResult<Response> {
    decide(state, person, address, id, || {
        let reason = reason(body, true)?.expect("a required reason is present");
        Ok(Verdict::Reject { reason })
    })
    .await
}
