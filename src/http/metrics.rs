//! `GET /v1/metrics` (what idem prevented and what waits, from the ledger) and `GET /metrics`
//! (this process's counters in the Prometheus text format, for scrapers).

use app::domain::Namespace;
use app::ledger::metrics::{MetricsError, MetricsReport, ToolsReport};
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::auth::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use super::operations::visible_namespace;
use crate::startup::AppState;

/// `/v1/metrics` and `/metrics`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/metrics", get(metrics))
        .route("/v1/metrics/tools", get(tools))
        .route("/metrics", get(prometheus))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct MetricsParams {
    /// `<N>m`, `<N>h` or `<N>d`, from 1 minute to 30 days; default `24h`.
    #[param(
        example = "24h",
        pattern = r"^(([1-9]|[1-9][0-9]{1,3}|[1-3][0-9]{4}|4[0-2][0-9]{3}|43[01][0-9]{2}|43200)m|([1-9]|[1-9][0-9]|[1-6][0-9]{2}|7[01][0-9]|720)h|([1-9]|[12][0-9]|30)d)$"
    )]
    window: Option<String>,
    /// Only this namespace (people). An agent always gets its own namespace; asking for
    /// another one answers zeros, as for a namespace with no activity.
    #[param(value_type = Option<Namespace>)]
    namespace: Option<String>,
}

impl From<MetricsError> for ApiError {
    fn from(error: MetricsError) -> Self {
        match error {
            MetricsError::InvalidWindow(invalid) => {
                ApiError::bad_request("invalid_window", invalid.to_string())
            }
            MetricsError::Store(inner) => inner.into(),
        }
    }
}

/// Duplicates prevented, mismatches, reconciliation latency and manual interventions over a
/// window, with a series of equal buckets (oldest first, zeros included); and what waits now
/// (`unknown_now`, `stuck_unknown`, `awaiting_approval`).
#[utoipa::path(
    get,
    path = "/v1/metrics",
    operation_id = "read_metrics",
    tag = "metrics",
    security(("api_key" = []), ("session" = [])),
    params(MetricsParams),
    responses(
        (status = 200, body = MetricsReport,
            description = "The window's counters, the gauges of now, and the series: buckets \
                of 5 minutes (windows up to 2h), 1 hour (up to 2d) or 6 hours, laid back from \
                the end of the current minute; the oldest may be shorter"),
        (status = 400, body = ErrorBody,
            description = "`invalid_window` or `invalid_namespace`"),
    )
)]
pub(crate) async fn metrics(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<MetricsParams>,
) -> ApiResult<AppJson<MetricsReport>> {
    let window = params.window.as_deref();
    let Some(namespace) = scope(&caller, params.namespace)? else {
        return Ok(AppJson(state.metrics.empty(window)?));
    };
    let report = state.metrics.read(namespace.as_ref(), window).await?;
    Ok(AppJson(report))
}

/// The namespace a caller's metrics cover (`Some(None)`: all), or `None` when an agent asked
/// for another namespace than its own, which answers as one with no activity.
fn scope(caller: &Caller, asked: Option<String>) -> ApiResult<Option<Option<Namespace>>> {
    // Left empty, as a form sends it, it filters nothing (as on the operations list).
    let asked = asked
        .filter(|text| !text.is_empty())
        .map(Namespace::try_from)
        .transpose()
        .map_err(|e| ApiError::bad_request("invalid_namespace", e.to_string()))?;
    Ok(match visible_namespace(caller)? {
        // An agent's scope is its namespace, whatever it asks for.
        Some(own) if asked.as_ref().is_some_and(|asked| asked != own) => None,
        Some(own) => Some(Some(own.clone())),
        None => Some(asked),
    })
}

/// Where the trouble is: one row per namespace and tool with the operations created, the
/// duplicates prevented and the failures of the window, what is `unknown`, stuck and
/// `awaiting_approval` now, and the p95 reconciliation latency of the window.
#[utoipa::path(
    get,
    path = "/v1/metrics/tools",
    operation_id = "read_tool_metrics",
    tag = "metrics",
    security(("api_key" = []), ("session" = [])),
    params(MetricsParams),
    responses(
        (status = 200, body = ToolsReport,
            description = "Rows by namespace, then tool; a pair with nothing in the window and \
                nothing waiting has no row"),
        (status = 400, body = ErrorBody,
            description = "`invalid_window` or `invalid_namespace`"),
    )
)]
pub(crate) async fn tools(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<MetricsParams>,
) -> ApiResult<AppJson<ToolsReport>> {
    let window = params.window.as_deref();
    match scope(&caller, params.namespace)? {
        Some(namespace) => Ok(AppJson(
            state.metrics.read_tools(namespace.as_ref(), window).await?,
        )),
        None => {
            let own = visible_namespace(&caller)?;
            let mut nobody = state.metrics.read_tools(own, window).await?;
            nobody.tools.clear();
            Ok(AppJson(nobody))
        }
    }
}

/// This process's counters and histograms in the Prometheus text format (version 0.0.4):
/// claims by outcome, replays, in-flight rejections, mismatches, operations marked
/// `unknown`, reconciliations by result, manual interventions by kind, claim and
/// reconciliation latency; and the ledger's gauges of what waits now. Open to any caller, like `/healthz`: it carries no namespace,
/// key or argument, only process-wide counts.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "prometheus_metrics",
    tag = "metrics",
    responses(
        (status = 200, content_type = "text/plain; version=0.0.4", body = String,
            description = "Prometheus text exposition"),
    )
)]
pub(crate) async fn prometheus(State(state): State<AppState>) -> Response {
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    let mut text = state.ledger.telemetry().render();
    text.push_str(&ledger_gauges(&state).await);
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// What waits in the whole ledger now (the same for every process on one database), as
/// gauges: the conditions people are alerted on. Left out when the database cannot tell.
async fn ledger_gauges(state: &AppState) -> String {
    let report = match state.metrics.read(None, Some("5m")).await {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "the ledger's gauges are left out of /metrics");
            return String::new();
        }
    };
    let stuck_after = app::views::StuckAfter::of(state.metrics.stuck_after()).words();
    let gauges = [
        (
            "idem_unknown_operations",
            "Operations unknown now, in the whole ledger".to_owned(),
            report.unknown_now,
        ),
        (
            "idem_stuck_unknown_operations",
            format!(
                "Operations unknown for longer than {stuck_after} (IDEM_STUCK_AFTER), in the whole ledger"
            ),
            report.stuck_unknown,
        ),
        (
            "idem_awaiting_approval_operations",
            "Operations waiting for a person's approval, in the whole ledger".to_owned(),
            report.awaiting_approval,
        ),
    ];
    gauges
        .iter()
        .map(|(name, help, value)| {
            format!("# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n")
        })
        .collect()
}
