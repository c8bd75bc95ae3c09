//! Liveness and readiness for load balancers and orchestrators.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use crate::startup::AppState;

/// `/healthz` and `/readyz`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

/// `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handlers answer with `json!`
struct HealthBody {
    #[schema(example = "ok")]
    status: String,
}

/// The process is up and serving.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    responses(
        (status = 200, body = HealthBody,
            description = "The process is up: `{\"status\": \"ok\"}`"),
    )
)]
async fn healthz() -> AppJson<Value> {
    AppJson(json!({ "status": "ok" }))
}

/// The process can do its work: the database answers and no background worker is down.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses(
        (status = 200, body = HealthBody,
            description = "The database answers: `{\"status\": \"ready\"}`"),
        (status = 503, body = ErrorBody,
            description = "`service_unavailable`: the database is not reachable, or a \
                background worker is down (it panicked and is being restarted); `details` \
                says which: `{\"database\": \"ok\"|\"unreachable\", \"workers_down\": [names]}`"),
    )
)]
async fn readyz(State(state): State<AppState>) -> ApiResult<AppJson<Value>> {
    let reachable = state.database.ping().await;
    if let Err(error) = &reachable {
        tracing::warn!(%error, "readiness check failed");
    }
    let mut workers_down = state.database.tasks_down();
    workers_down.extend(state.workers.down());
    if reachable.is_ok() && workers_down.is_empty() {
        return Ok(AppJson(json!({ "status": "ready" })));
    }
    let message = if reachable.is_ok() {
        "a background worker is down"
    } else {
        "the database is not reachable"
    };
    let database = if reachable.is_ok() {
        "ok"
    } else {
        "unreachable"
    };
    Err(ApiError::Unavailable {
        message,
        details: json!({ "database": database, "workers_down": workers_down }),
    })
}
