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

/// The process can do its work: the database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    responses(
        (status = 200, body = HealthBody,
            description = "The database answers: `{\"status\": \"ready\"}`"),
        (status = 503, body = ErrorBody,
            description = "`service_unavailable`: the database is not reachable"),
    )
)]
async fn readyz(State(state): State<AppState>) -> ApiResult<AppJson<Value>> {
    match state.database.ping().await {
        Ok(()) => Ok(AppJson(json!({ "status": "ready" }))),
        Err(error) => {
            tracing::warn!(%error, "readiness check failed");
            Err(ApiError::Unavailable("the database is not reachable"))
        }
    }
}
