//! The approval queue in one read: each waiting request with the arguments and deadline its
//! card shows, which the ledger's list already holds (no read per card).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::views::OperationRow;
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{answer_with_status, ledger, person_who_may};

/// A request waiting for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub row: OperationRow,
    /// Already redacted when it was stored.
    pub args: Value,
    /// When the request lapses (the operation is then rejected as "approval expired").
    pub expires_at: Option<DateTime<Utc>>,
}

#[cfg(feature = "ssr")]
impl From<&crate::ledger::Operation> for ApprovalRequest {
    fn from(operation: &crate::ledger::Operation) -> Self {
        Self {
            row: OperationRow::from(operation),
            args: operation.args.clone(),
            expires_at: operation.approval_expires_at,
        }
    }
}

/// The first page of operations awaiting approval, oldest first.
#[server(prefix = "/api", endpoint = "approval_queue")]
pub async fn approval_queue() -> Result<Vec<ApprovalRequest>, UiError> {
    use crate::domain::{OperationStatus, Permission};
    use crate::ledger::OperationFilter;

    let ledger = ledger()?;
    person_who_may(Permission::Read).await?;
    let filter = OperationFilter {
        status: Some(OperationStatus::AwaitingApproval),
        oldest_first: true,
        ..OperationFilter::default()
    };
    let (operations, _more) = ledger
        .list(&filter, super::PAGE_SIZE)
        .await
        .map_err(answer_with_status)?;
    Ok(operations.iter().map(ApprovalRequest::from).collect())
}

/// One request for approval as its page shows it: the request and what the same run did
/// before it, so the approver sees the call in context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDetail {
    pub request: ApprovalRequest,
    /// Operations of the same run (and namespace) created before this one, oldest first.
    pub earlier: Vec<OperationRow>,
}

/// The request `id` (whatever its status now) with the earlier operations of its run.
#[server(prefix = "/api", endpoint = "approval")]
pub async fn read_approval(id: uuid::Uuid) -> Result<ApprovalDetail, UiError> {
    use crate::domain::Permission;
    use crate::ledger::OperationFilter;

    let ledger = ledger()?;
    person_who_may(Permission::Read).await?;
    let operation = ledger
        .operation(None, id)
        .await
        .map_err(answer_with_status)?;
    // Waiting, decided, or lapsed: anything else never asked a person.
    let was_requested = operation.status == crate::domain::OperationStatus::AwaitingApproval
        || operation.approval.is_some()
        || operation.approval_expires_at.is_some();
    if !was_requested {
        return Err(answer_with_status(UiError::NotFound(
            "this operation never waited for approval".to_owned(),
        )));
    }
    let earlier = match &operation.run_id {
        Some(run_id) => {
            let filter = OperationFilter {
                namespace: Some(operation.namespace.clone()),
                run_id: Some(run_id.clone()),
                created_until: Some(operation.created_at),
                oldest_first: true,
                ..OperationFilter::default()
            };
            let (operations, _more) = ledger
                .list(&filter, super::PAGE_SIZE)
                .await
                .map_err(answer_with_status)?;
            // Ids are UUIDv7: those below this one were created before it.
            operations
                .iter()
                .filter(|earlier| earlier.id < id)
                .map(OperationRow::from)
                .collect()
        }
        None => Vec::new(),
    };
    Ok(ApprovalDetail {
        request: ApprovalRequest::from(&operation),
        earlier,
    })
}

/// The most requests the header counts one by one; above it shows "99+".
pub const WAITING_SHOWN_UP_TO: u32 = 99;

/// How many requests wait for a decision, capped one past [`WAITING_SHOWN_UP_TO`] (the
/// header shows no more), for people who may decide them.
#[server(prefix = "/api", endpoint = "waiting_approvals")]
pub async fn waiting_approvals() -> Result<u32, UiError> {
    use crate::domain::Permission;

    let ledger = ledger()?;
    person_who_may(Permission::Approve).await?;
    let waiting = ledger
        .count_awaiting_approval()
        .await
        .map_err(answer_with_status)?;
    Ok(u32::try_from(waiting)
        .unwrap_or(u32::MAX)
        .min(WAITING_SHOWN_UP_TO + 1))
}
