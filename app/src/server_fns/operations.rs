//! Operations for the UI: the filtered table, one operation with its trail, and people's
//! actions on it. Every function checks the session's role first.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Outcome;
use crate::operations_filter::OperationsFilter;
use crate::views::{EventsView, OperationDetail, OperationRow, StuckAfter};
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{acting, answer_with_status, ledger, metrics, people_actions, person_who_may};
#[cfg(feature = "ssr")]
use crate::domain::Permission;

/// Rows per page of the operations table and the queues.
pub const PAGE_SIZE: u32 = 50;

/// One page of operations and the cursor of the next, if more follow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationsPage {
    pub rows: Vec<OperationRow>,
    /// The last row's id when more follow; pass it back as `cursor`.
    pub next_cursor: Option<String>,
    /// How long an operation may be `unknown` before it is stuck (`IDEM_STUCK_AFTER`).
    pub stuck_after: StuckAfter,
}

/// A page of operations matching the filter (every field optional; empty means "any"),
/// newest first, or oldest first for queues.
#[server(prefix = "/api", endpoint = "operations")]
pub async fn list_operations(
    filter: OperationsFilter,
    cursor: Option<String>,
    oldest_first: bool,
) -> Result<OperationsPage, UiError> {
    // Services are taken before the first await: during server rendering the Leptos
    // context is only there until the fetch first yields.
    let ledger = ledger()?;
    let stuck_after = metrics()?.stuck_after();
    person_who_may(Permission::Read).await?;
    let filter = ledger_filter(filter, cursor, oldest_first, stuck_after)
        .map_err(|error| answer_with_status(UiError::Invalid(error)))?;
    let (operations, more) = ledger
        .list(&filter, PAGE_SIZE)
        .await
        .map_err(answer_with_status)?;
    let rows: Vec<OperationRow> = operations.iter().map(OperationRow::from).collect();
    let next_cursor = more
        .then(|| rows.last().map(|row| row.id.to_string()))
        .flatten();
    Ok(OperationsPage {
        rows,
        next_cursor,
        stuck_after: StuckAfter::of(stuck_after),
    })
}

/// The ledger's filter for the table's, or what is wrong with it.
#[cfg(feature = "ssr")]
fn ledger_filter(
    filter: OperationsFilter,
    cursor: Option<String>,
    oldest_first: bool,
    stuck_after: chrono::TimeDelta,
) -> Result<crate::ledger::OperationFilter, String> {
    use crate::domain::{Namespace, OperationStatus, ToolName};
    use crate::views::parse_form_time;

    let given = |text: String| Some(text.trim().to_owned()).filter(|t| !t.is_empty());
    let moment = |text: String, name: &str| {
        given(text)
            .map(|t| {
                parse_form_time(&t).ok_or_else(|| format!("{name} {t:?} is not a date and time"))
            })
            .transpose()
    };
    let stuck = match filter.stuck.as_str() {
        "" | "false" => None,
        "true" => Some(stuck_after),
        other => return Err(format!("stuck {other:?} is neither true nor false")),
    };
    Ok(crate::ledger::OperationFilter {
        status: given(filter.status)
            .map(|s| s.parse::<OperationStatus>())
            .transpose()
            .map_err(|e| e.to_string())?,
        tool: given(filter.tool)
            .map(ToolName::try_from)
            .transpose()
            .map_err(|e| e.to_string())?,
        namespace: given(filter.namespace)
            .map(Namespace::try_from)
            .transpose()
            .map_err(|e| e.to_string())?,
        run_id: given(filter.run_id),
        key_contains: given(filter.key),
        created_since: moment(filter.since, "from")?,
        created_until: moment(filter.until, "to")?,
        unknown_longer_than: stuck,
        oldest_first,
        before: cursor
            .and_then(given)
            .map(|c| c.parse::<Uuid>())
            .transpose()
            .map_err(|_| "the page cursor is not valid; start from the first page".to_owned())?,
    })
}

/// One operation with its audit trail.
#[server(prefix = "/api", endpoint = "operation")]
pub async fn read_operation(id: Uuid) -> Result<OperationDetail, UiError> {
    let ledger = ledger()?;
    person_who_may(Permission::Read).await?;
    let operation = ledger
        .operation(None, id)
        .await
        .map_err(answer_with_status)?;
    let events = ledger
        .events_page(None, id, newest_events(None))
        .await
        .map_err(answer_with_status)?;
    Ok(OperationDetail::new(&operation, events))
}

/// Events shown at a time on an operation's page, newest first.
pub const EVENTS_PAGE_SIZE: u32 = 50;

/// The page of events before `earlier` (the newest ones when `None`).
#[cfg(feature = "ssr")]
fn newest_events(earlier: Option<crate::ledger::EventPosition>) -> crate::ledger::EventPage {
    crate::ledger::EventPage {
        after: earlier,
        limit: EVENTS_PAGE_SIZE,
        newest_first: true,
    }
}

/// The events of an operation before the cursor `earlier` (from an [`EventsView`]).
#[server(prefix = "/api", endpoint = "earlier_events")]
pub async fn read_earlier_events(id: Uuid, earlier: String) -> Result<EventsView, UiError> {
    let ledger = ledger()?;
    person_who_may(Permission::Read).await?;
    let position = crate::ledger::EventPosition::from_cursor(&earlier)
        .ok_or_else(|| UiError::Invalid("that list of events is out of date; reload".into()))?;
    let events = ledger
        .events_page(None, id, newest_events(Some(position)))
        .await
        .map_err(answer_with_status)?;
    Ok(EventsView::from(events))
}

/// Approves an operation that waits for approval (approvers and admins).
#[server(prefix = "/api", endpoint = "approve")]
pub async fn approve_operation(id: Uuid, reason: Option<String>) -> Result<OperationRow, UiError> {
    let actions = people_actions()?;
    let by = acting(Permission::Approve).await?;
    let operation = actions
        .approve(&by, id, reason)
        .await
        .map_err(answer_with_status)?;
    Ok(OperationRow::from(&operation))
}

/// Rejects an operation that waits for approval; the reason is required.
#[server(prefix = "/api", endpoint = "reject")]
pub async fn reject_operation(id: Uuid, reason: Option<String>) -> Result<OperationRow, UiError> {
    let actions = people_actions()?;
    let by = acting(Permission::Approve).await?;
    let operation = actions
        .reject(&by, id, reason)
        .await
        .map_err(answer_with_status)?;
    Ok(OperationRow::from(&operation))
}

/// Asks the provider about an `unknown` operation now (operators and admins).
#[server(prefix = "/api", endpoint = "reconcile")]
pub async fn reconcile_operation(id: Uuid) -> Result<OperationRow, UiError> {
    let actions = people_actions()?;
    let by = acting(Permission::Operate).await?;
    let operation = actions
        .reconcile(&by, id)
        .await
        .map_err(answer_with_status)?;
    Ok(OperationRow::from(&operation))
}

/// Settles a `pending` or `unknown` operation by hand. `result` and `error` are JSON texts
/// (empty: none); the reason is required.
#[server(prefix = "/api", endpoint = "resolve")]
pub async fn resolve_operation(
    id: Uuid,
    outcome: Outcome,
    result: Option<String>,
    error: Option<String>,
    retryable: bool,
    reason: Option<String>,
) -> Result<OperationRow, UiError> {
    use crate::people_actions::ResolveRequest;

    let actions = people_actions()?;
    let by = acting(Permission::Operate).await?;
    let request = ResolveRequest {
        outcome,
        result: json_field("result", result)?,
        error: json_field("error", error)?,
        retryable,
        reason,
    };
    let operation = actions
        .resolve(&by, id, request)
        .await
        .map_err(answer_with_status)?;
    Ok(OperationRow::from(&operation))
}

/// Ends a settled operation's key now, so the next claim starts anew; the reason is required.
#[server(prefix = "/api", endpoint = "expire")]
pub async fn expire_operation(id: Uuid, reason: Option<String>) -> Result<OperationRow, UiError> {
    let actions = people_actions()?;
    let by = acting(Permission::Operate).await?;
    let operation = actions
        .expire(&by, id, reason)
        .await
        .map_err(answer_with_status)?;
    Ok(OperationRow::from(&operation))
}

/// A JSON text typed by a person; empty means none.
#[cfg(feature = "ssr")]
fn json_field(name: &str, text: Option<String>) -> Result<Option<serde_json::Value>, UiError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| answer_with_status(UiError::Invalid(format!("{name} is not valid JSON: {e}"))))
}
