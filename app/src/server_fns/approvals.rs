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
    Ok(operations
        .iter()
        .map(|operation| ApprovalRequest {
            row: OperationRow::from(operation),
            args: operation.args.clone(),
            expires_at: operation.approval_expires_at,
        })
        .collect())
}
