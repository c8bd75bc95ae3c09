//! `/v1/operations`: the agent API (claim, complete, unknown) and reads, one module each.

mod approvals;
mod changes;
mod claim;
mod interventions;
mod reads;
mod reports;

use app::domain::{Namespace, Permission};
use app::ledger::{LedgerError, Operation, SettleRefused};
use app::people_actions::{Acting, ActionError};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use uuid::Uuid;

use super::audit::ClientAddress;
use super::auth::{AgentCaller, Caller};
use super::error::{ApiError, ApiResult};
use super::json::AppJson;
use crate::startup::AppState;

pub(super) use approvals::{__path_approve, __path_reject, approve, reject};
pub(super) use changes::{__path_changes, changes};
pub(super) use claim::{__path_claim, claim};
pub(crate) use claim::{begin_request, claim_response, prefer_wait, ClaimBody};
pub(super) use interventions::{
    __path_expire, __path_reconcile, __path_resolve, expire, reconcile, resolve,
};
pub(super) use reads::{__path_events, __path_list, __path_read, events, list, read};
pub(super) use reports::{__path_complete, __path_unknown, complete, unknown};

/// The operation routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/operations", post(claim).get(list))
        .route("/v1/operations/changes", get(changes))
        .route("/v1/operations/{id}", get(read))
        .route("/v1/operations/{id}/events", get(events))
        .route("/v1/operations/{id}/complete", post(complete))
        .route("/v1/operations/{id}/unknown", post(unknown))
        .route("/v1/operations/{id}/approve", post(approve))
        .route("/v1/operations/{id}/reject", post(reject))
        .route("/v1/operations/{id}/reconcile", post(reconcile))
        .route("/v1/operations/{id}/resolve", post(resolve))
        .route("/v1/operations/{id}/expire", post(expire))
}

/// The person acting, as the shared people's actions take them.
fn acting(person: crate::http::auth::Person, address: ClientAddress) -> Acting {
    Acting {
        person: person.0,
        address: address.0,
    }
}

impl From<ActionError> for ApiError {
    fn from(error: ActionError) -> Self {
        match error {
            ActionError::MissingReason(message) => ApiError::bad_request("missing_reason", message),
            ActionError::Invalid(message) => ApiError::bad_request("invalid_request", message),
            ActionError::Ledger(error) => error.into(),
        }
    }
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
            LedgerError::VerdictRefused(refused) => ApiError::Conflict {
                code: match refused {
                    app::ledger::VerdictRefused::NotAwaitingApproval { .. } => {
                        "operation_not_awaiting_approval"
                    }
                    app::ledger::VerdictRefused::ApprovalExpired { .. } => "approval_expired",
                },
                message: refused.to_string(),
            },
            LedgerError::SettleRefused(refused) => settle_refused(refused),
            LedgerError::NotReconcilable { .. } => ApiError::Conflict {
                code: "not_reconcilable",
                message: error.to_string(),
            },
            LedgerError::NoProvider | LedgerError::Internal(_) => {
                ApiError::Internal(error.to_string().into())
            }
            LedgerError::Store(inner) => inner.into(),
        }
    }
}

fn settle_refused(refused: SettleRefused) -> ApiError {
    let message = refused.to_string();
    match refused {
        SettleRefused::NotUnknown { .. } => ApiError::Conflict {
            code: "operation_not_unknown",
            message,
        },
        SettleRefused::Transition(invalid) => ApiError::Conflict {
            code: invalid.code(),
            message,
        },
        SettleRefused::ProviderUnavailable {
            next_attempt_at, ..
        } => ApiError::BadGateway {
            code: "provider_unavailable",
            message,
            details: serde_json::json!({ "next_attempt_at": next_attempt_at }),
        },
    }
}

/// `{"operation": Op}`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct OperationBody<'a> {
    pub(crate) operation: &'a Operation,
}

/// `200 {"operation": Op}`, the answer of every read and action on one operation.
pub(crate) fn operation_answer(operation: &Operation) -> Response {
    AppJson(OperationBody { operation }).into_response()
}

pub(crate) fn actor(agent: &AgentCaller) -> String {
    format!("agent:{}/{}", agent.0.namespace, agent.0.key_name)
}

pub(super) fn operation_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::NotFound("no such operation"))
}

/// Agents see their own namespace; people with read permission see all.
pub(super) fn visible_namespace(caller: &Caller) -> ApiResult<Option<&Namespace>> {
    match caller {
        Caller::Agent(agent) => Ok(Some(agent.namespace())),
        Caller::Person(person) => person.require(Permission::Read).map(|()| None),
    }
}
