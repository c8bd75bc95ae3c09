//! `GET /v1/operations/export`: every operation a list filter keeps, as CSV, for a
//! spreadsheet or a ticket. Rows are read and sent a page at a time, so a large ledger
//! streams instead of being held in memory.

use app::ledger::{Operation, OperationFilter};
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use futures_util::stream;
use serde::Serialize;

use super::reads::{callers_filter, parse_list, ListParams};
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::startup::AppState;

/// Operations read from the ledger per page of the export.
const ROWS_PER_PAGE: u32 = 500;

/// The header row: [`ExportRow`]'s fields, in order. Written by hand because the csv crate
/// writes a header only with a first row, and an empty export still has one.
const COLUMNS: [&str; 16] = [
    "id",
    "namespace",
    "tool",
    "effect",
    "key",
    "status",
    "attempt",
    "run_id",
    "step",
    "provider_ref",
    "created_at",
    "updated_at",
    "completed_at",
    "unknown_since",
    "reconcile_attempts",
    "error",
];

/// One operation as a CSV row, its fields in [`COLUMNS`] order.
#[derive(Serialize)]
struct ExportRow<'a> {
    id: String,
    namespace: &'a str,
    tool: &'a str,
    effect: &'a str,
    key: &'a str,
    status: &'a str,
    attempt: u32,
    run_id: Option<&'a str>,
    step: Option<u64>,
    provider_ref: Option<&'a str>,
    created_at: String,
    updated_at: String,
    completed_at: Option<String>,
    unknown_since: Option<String>,
    reconcile_attempts: u32,
    /// The stored error, as compact JSON.
    error: Option<String>,
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl<'a> From<&'a Operation> for ExportRow<'a> {
    fn from(op: &'a Operation) -> Self {
        Self {
            id: op.id.to_string(),
            namespace: op.namespace.as_str(),
            tool: op.tool.as_str(),
            effect: op.effect.as_str(),
            key: op.key.as_str(),
            status: op.status.as_str(),
            attempt: op.attempt,
            run_id: op.run_id.as_deref(),
            step: op.step,
            provider_ref: op.provider_ref.as_deref(),
            created_at: time(op.created_at),
            updated_at: time(op.updated_at),
            completed_at: op.completed_at.map(time),
            unknown_since: op.unknown_since.map(time),
            reconcile_attempts: op.reconcile_attempts,
            error: op.error.as_ref().map(|error| error.to_string()),
        }
    }
}

/// The CSV text of `operations`, after the header row when `header` is set.
fn csv_rows(operations: &[Operation], header: bool) -> Result<Vec<u8>, ApiError> {
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    if header {
        writer
            .write_record(COLUMNS)
            .map_err(|e| ApiError::Internal(e.into()))?;
    }
    for operation in operations {
        writer
            .serialize(ExportRow::from(operation))
            .map_err(|e| ApiError::Internal(e.into()))?;
    }
    writer
        .into_inner()
        .map_err(|e| ApiError::Internal(e.into_error().into()))
}

/// Where the export is between pages: the filter, moved past the last row sent.
struct Remaining {
    state: AppState,
    filter: OperationFilter,
}

impl Remaining {
    /// The next page and whether more follow.
    async fn page(&mut self) -> ApiResult<(Vec<Operation>, bool)> {
        let (operations, more) = self.state.ledger.list(&self.filter, ROWS_PER_PAGE).await?;
        self.filter.before = operations.last().map(|op| op.id);
        Ok((operations, more))
    }
}

/// The operations a list filter keeps, newest first, as CSV.
#[utoipa::path(
    get,
    path = "/v1/operations/export",
    operation_id = "export_operations",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    params(ListParams),
    responses(
        (status = 200, content_type = "text/csv", body = String,
            description = "Every operation the filter keeps (not one page: `limit` and \
                `cursor` are not used), newest first, after a header row"),
        (status = 400, body = ErrorBody,
            description = "The list's errors: `invalid_status`, `invalid_tool_name`, \
                `invalid_namespace`, `invalid_time` or `invalid_stuck`"),
    )
)]
pub(crate) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    Query(mut params): Query<ListParams>,
) -> ApiResult<Response> {
    (params.limit, params.cursor) = (None, None);
    let (filter, _) = parse_list(params, state.metrics.stuck_after())?;
    let Some(filter) = callers_filter(&caller, filter)? else {
        return Ok(csv_response(Body::from(csv_rows(&[], true)?)));
    };
    let mut remaining = Remaining { state, filter };
    // The first page is read before answering, so a failure still gets the error shape.
    let (operations, more) = remaining.page().await?;
    let first = csv_rows(&operations, true)?;
    if !more {
        return Ok(csv_response(Body::from(first)));
    }
    let rest = stream::unfold(Some(remaining), |remaining| async move {
        let mut remaining = remaining?;
        let next = remaining
            .page()
            .await
            .and_then(|(operations, more)| csv_rows(&operations, false).map(|text| (text, more)));
        match next {
            Ok((text, more)) => Some((Ok(text), more.then_some(remaining))),
            Err(error) => {
                // The answer has begun; ending it early is all that is left to say.
                tracing::error!(%error, "the operations export stopped");
                Some((Err(std::io::Error::other(error.to_string())), None))
            }
        }
    });
    let body = stream::once(async { Ok::<_, std::io::Error>(first) });
    Ok(csv_response(Body::from_stream(
        futures_util::StreamExt::chain(body, rest),
    )))
}

fn csv_response(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"idem-operations.csv\"",
            ),
        ],
        body,
    )
        .into_response()
}
