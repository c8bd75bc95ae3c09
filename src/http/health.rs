//! Liveness and readiness for load balancers and orchestrators.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::json::AppJson;
use crate::startup::AppState;

/// `/healthz` and `/readyz`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

/// The process is up and serving.
async fn healthz() -> AppJson<Value> {
    AppJson(json!({ "status": "ok" }))
}

/// The process can do its work: the database answers.
async fn readyz(State(state): State<AppState>) -> ApiResult<AppJson<Value>> {
    match state.database.ping().await {
        Ok(()) => Ok(AppJson(json!({ "status": "ready" }))),
        Err(error) => {
            tracing::warn!(%error, "readiness check failed");
            Err(ApiError::Unavailable("the database is not reachable"))
        }
    }
}
