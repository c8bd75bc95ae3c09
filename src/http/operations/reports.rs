//! A lease holder's reports: `complete` and `unknown`.

use app::ledger::{Operation, Report};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{actor, operation_id};
use crate::http::auth::AgentCaller;
use crate::http::error::{ApiResult, ErrorBody};
use crate::http::json::AppJson;
use crate::startup::AppState;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Succeeded,
    Failed,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ErrorInfo {
    code: String,
    message: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct CompleteBody {
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

/// A report's answer: `{"operation": Op}`, as every answer about one operation. The first
/// contract said "`200` with the final Op", and clients of it read the Op's fields at the top
/// level: they stay there too (deprecated) so that no such client breaks.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ReportBody<'a> {
    #[serde(flatten)]
    fields: &'a Operation,
    operation: &'a Operation,
}

/// Hands the lease holder's report on the operation `id` to the ledger and answers with the
/// operation it leaves.
async fn report_to_ledger(
    state: &AppState,
    agent: &AgentCaller,
    id: &str,
    lease_token: &str,
    report: Report,
) -> ApiResult<Response> {
    let operation = state
        .ledger
        .report(
            agent.namespace(),
            operation_id(id)?,
            lease_token,
            report,
            &actor(agent),
        )
        .await?;
    Ok(AppJson(ReportBody {
        fields: &operation,
        operation: &operation,
    })
    .into_response())
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
        (status = 200, body = ReportBody,
            description = "The final operation; repeating the same completion (same token and \
                outcome) answers 200 again"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation in the agent's namespace"),
        (status = 409, body = ErrorBody,
            description = "`operation_already_final` (another report on a final operation) or \
                `lease_lost` (a wrong or expired token on one that is not final)"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace(), operation = %id))]
pub(crate) async fn complete(
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
    report_to_ledger(&state, &agent, &id, &body.lease_token, report).await
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct UnknownBody {
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
        (status = 200, body = ReportBody,
            description = "The operation, now `unknown`; repeating the same report with the same \
                token answers 200 again"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation in the agent's namespace"),
        (status = 409, body = ErrorBody,
            description = "`operation_already_final` (another report on a final operation) or \
                `lease_lost` (a wrong or expired token on one that is not final)"),
    )
)]
#[tracing::instrument(skip_all, fields(namespace = %agent.namespace(), operation = %id))]
pub(crate) async fn unknown(
    State(state): State<AppState>,
    agent: AgentCaller,
    Path(id): Path<String>,
    AppJson(body): AppJson<UnknownBody>,
) -> ApiResult<Response> {
    let report = Report::Unknown {
        error: error_value(body.error),
    };
    report_to_ledger(&state, &agent, &id, &body.lease_token, report).await
}
