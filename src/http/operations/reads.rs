//! Reading operations: one, a filtered page, and the audit trail.

use app::domain::{Namespace, OperationStatus, ToolName};
use app::ledger::{Event, Operation, OperationFilter};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::{operation_answer, operation_id, visible_namespace, OperationBody};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::json::AppJson;
use crate::http::page;
use crate::startup::AppState;

/// One operation.
#[utoipa::path(
    get,
    path = "/v1/operations/{id}",
    operation_id = "read_operation",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`")),
    responses(
        (status = 200, body = OperationBody, description = "The operation"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation (or not in the agent's namespace)"),
    )
)]
pub(crate) async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let operation = state
        .ledger
        .operation(visible_namespace(&caller)?, operation_id(&id)?)
        .await?;
    Ok(operation_answer(&operation))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    #[param(value_type = Option<OperationStatus>)]
    pub(super) status: Option<String>,
    #[param(value_type = Option<ToolName>)]
    pub(super) tool: Option<String>,
    pub(super) run_id: Option<String>,
    /// Only operations whose key contains this text.
    pub(super) key_contains: Option<String>,
    /// For an agent, another namespace than its own lists as empty.
    #[param(value_type = Option<Namespace>)]
    pub(super) namespace: Option<String>,
    /// 1 to 200, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    pub(super) limit: Option<String>,
    /// The `next_cursor` of the previous page; opaque.
    pub(super) cursor: Option<String>,
    /// Only operations created at or after this moment (RFC 3339).
    #[param(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub(super) since: Option<String>,
    /// Only operations created before this moment (RFC 3339).
    #[param(value_type = Option<chrono::DateTime<chrono::Utc>>)]
    pub(super) until: Option<String>,
    /// `true`: only stuck operations, `unknown` for longer than `IDEM_STUCK_AFTER`.
    #[param(value_type = Option<bool>)]
    pub(super) stuck: Option<String>,
}

/// A page of operations, newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ListBody {
    operations: Vec<Operation>,
    next_cursor: Option<String>,
}

/// A filter left empty (`?status=&tool=`, as API.md spells the query) is no filter.
fn given(value: Option<String>) -> Option<String> {
    value.filter(|text| !text.is_empty())
}

/// A moment of a time-range filter, in RFC 3339.
fn moment(value: Option<String>, name: &str) -> ApiResult<Option<DateTime<Utc>>> {
    given(value)
        .map(|text| {
            DateTime::parse_from_rfc3339(&text)
                .map(|at| at.to_utc())
                .map_err(|e| {
                    ApiError::bad_request(
                        "invalid_time",
                        format!("{name} {text:?} is not an RFC 3339 time: {e}"),
                    )
                })
        })
        .transpose()
}

/// `stuck=true` keeps the operations unknown for longer than `stuck_after`.
fn stuck_filter(value: Option<String>, stuck_after: TimeDelta) -> ApiResult<Option<TimeDelta>> {
    match given(value).as_deref() {
        None | Some("false") => Ok(None),
        Some("true") => Ok(Some(stuck_after)),
        Some(other) => Err(ApiError::bad_request(
            "invalid_stuck",
            format!("stuck {other:?} is neither true nor false"),
        )),
    }
}

pub(super) fn parse_list(
    params: ListParams,
    stuck_after: TimeDelta,
) -> ApiResult<(OperationFilter, u32)> {
    let invalid = |code: &'static str, message: &str| ApiError::bad_request(code, message);
    let (limit, before) = page::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    let filter = OperationFilter {
        namespace: given(params.namespace)
            .map(Namespace::try_from)
            .transpose()
            .map_err(|e| invalid("invalid_namespace", &e.to_string()))?,
        status: given(params.status)
            .map(|s| s.parse::<OperationStatus>())
            .transpose()
            .map_err(|e| invalid("invalid_status", &e.to_string()))?,
        tool: given(params.tool)
            .map(ToolName::try_from)
            .transpose()
            .map_err(|e| invalid(e.code(), &e.to_string()))?,
        run_id: given(params.run_id),
        key_contains: given(params.key_contains),
        before,
        created_since: moment(params.since, "since")?,
        created_until: moment(params.until, "until")?,
        unknown_longer_than: stuck_filter(params.stuck, stuck_after)?,
        ..Default::default()
    };
    Ok((filter, limit))
}

/// Operations, newest first (by creation), keyset-paginated.
#[utoipa::path(
    get,
    path = "/v1/operations",
    operation_id = "list_operations",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(ListParams),
    responses(
        (status = 200, body = ListBody,
            description = "A page of operations; `next_cursor` is null on the last page"),
        (status = 400, body = ErrorBody,
            description = "`invalid_limit`, `invalid_cursor`, `invalid_status`, \
                `invalid_tool_name`, `invalid_namespace`, `invalid_time` or `invalid_stuck`"),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<AppJson<ListBody>> {
    let (filter, limit) = parse_list(params, state.metrics.stuck_after())?;
    let Some(filter) = callers_filter(&caller, filter)? else {
        return Ok(AppJson(ListBody {
            operations: Vec::new(),
            next_cursor: None,
        }));
    };
    let (operations, more) = state.ledger.list(&filter, limit).await?;
    let next_cursor = page::next_cursor(more, operations.last().map(|op| op.id));
    Ok(AppJson(ListBody {
        operations,
        next_cursor,
    }))
}

/// The filter narrowed to what the caller may see: an agent's own namespace. `None`: the
/// list is empty, because an agent asked for another namespace, which lists exactly like one
/// with no operations.
pub(super) fn callers_filter(
    caller: &Caller,
    mut filter: OperationFilter,
) -> ApiResult<Option<OperationFilter>> {
    if let Caller::Agent(agent) = caller {
        if filter
            .namespace
            .as_ref()
            .is_some_and(|asked| asked != agent.namespace())
        {
            return Ok(None);
        }
        filter.namespace = Some(agent.namespace().clone());
    }
    visible_namespace(caller)?;
    Ok(Some(filter))
}

/// A page of the audit trail.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EventsBody {
    events: Vec<Event>,
    /// The `cursor` of the next page; `null` on the last one.
    next_cursor: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsParams {
    /// 1 to 1000, default 1000.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page.
    #[param(pattern = "^(e1_-?[0-9]{1,19}_-?[0-9]{1,19})?$")]
    cursor: Option<String>,
    /// `oldest` first (the default) or `newest` first.
    #[param(pattern = "^(oldest|newest)?$")]
    order: Option<String>,
}

/// The audit trail of an operation, oldest first (or newest first), a page at a time: at most
/// `limit` events (1000 when not given, the whole trail of nearly every operation) and the
/// `next_cursor` of the rest.
#[utoipa::path(
    get,
    path = "/v1/operations/{id}/events",
    operation_id = "list_events",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(("id" = Uuid, Path, description = "The operation's `id`"), EventsParams),
    responses(
        (status = 200, body = EventsBody, description = "A page of events"),
        (status = 400, body = ErrorBody,
            description = "`invalid_limit`, `invalid_cursor` or `invalid_order`"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: no such operation (or not in the agent's namespace)"),
    )
)]
pub(crate) async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(params): Query<EventsParams>,
) -> ApiResult<AppJson<EventsBody>> {
    let page = page::parse_events(
        params.limit.as_deref(),
        params.cursor.as_deref(),
        params.order.as_deref(),
    )?;
    let id = operation_id(&id)?;
    let found = state
        .ledger
        .events_page(visible_namespace(&caller)?, id, page)
        .await?;
    Ok(AppJson(EventsBody {
        events: found.events,
        next_cursor: found.next.map(|position| position.cursor()),
    }))
}
