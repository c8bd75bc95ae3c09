//! `/v1/operations`: the agent API (claim, complete, unknown) and reads, one module each.

mod approvals;
mod changes;
mod claim;
mod export;
mod interventions;
mod reads;
mod reports;

use app::domain::{Namespace, Permission};
use app::ledger::{LedgerError, Operation, SettleRefused};
use app::people_actions::{Acting, ActionError};
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::marker::PhantomData;
use uuid::Uuid;

use super::audit::ClientAddress;
use super::auth::{AgentCaller, Approver, Caller, Operator, Person};
use super::error::{ApiError, ApiResult};
use super::json::AppJson;
use crate::startup::AppState;

pub(super) use approvals::{__path_approve, __path_reject, approve, reject};
pub(super) use changes::{__path_changes, changes};
pub(super) use claim::{__path_claim, claim};
pub(crate) use claim::{claim_response, prefer_wait, sent_claim, ClaimBody};
pub(super) use export::{__path_export, export};
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
        .route("/v1/operations/export", get(export))
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

/// The role a person needs to act on an operation, as the extractor that checks it.
pub(crate) trait Role: FromRequestParts<AppState, Rejection = ApiError> {
    fn person(self) -> Person;
}

impl Role for Operator {
    fn person(self) -> Person {
        self.0
    }
}

impl Role for Approver {
    fn person(self) -> Person {
        self.0
    }
}

/// A person with the role `R` acting on the operation named in the path: who (from where)
/// and which operation. The role is checked before the body is read, so a caller without it
/// is told 403 whatever they send; an id that is not a UUID names no operation (404).
pub(crate) struct ActionOn<R> {
    pub by: Acting,
    pub id: Uuid,
    role: PhantomData<R>,
}

impl<R: Role> FromRequestParts<AppState> for ActionOn<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let person = R::from_request_parts(parts, state).await?.person();
        let Ok(address) = ClientAddress::from_request_parts(parts, state).await;
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound("no such operation"))?;
        Ok(Self {
            by: person.acting(address),
            id: operation_id(&id)?,
            role: PhantomData,
        })
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
