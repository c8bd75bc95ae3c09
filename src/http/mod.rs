//! The REST API: one `router()` per module, merged here, every error in the contract's shape.

mod admin;
pub mod admission;
pub mod audit;
pub mod auth;
pub mod csp;
pub mod csrf;
pub mod error;
mod health;
mod invoke;
pub mod json;
mod metrics;
mod openapi;
mod operations;
mod page;
pub mod rate_limit;
pub(crate) mod site;
mod tools;
pub mod transport;

use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, Request, Response};
use axum::middleware::Next;
use axum::Router;
use serde_json::json;

use crate::startup::AppState;
use error::{error_body, ApiError};

/// Every REST route, with body limits and the error-shape guarantee.
pub fn router(max_body_bytes: usize) -> Router<AppState> {
    Router::new()
        .merge(health::router())
        .merge(auth::router())
        .merge(admin::router())
        .merge(audit::router())
        .merge(operations::router())
        .merge(tools::router())
        .merge(metrics::router())
        .merge(openapi::router())
        .layer(DefaultBodyLimit::max(max_body_bytes))
}

/// The fallback for unknown paths under the API prefixes.
pub async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint")
}

/// Paths whose answers are JSON for machines (the UI's pages answer HTML).
fn is_api_path(path: &str) -> bool {
    ["/v1/", "/auth/"]
        .iter()
        .any(|prefix| path.starts_with(prefix))
        || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Rewrites any API error answer that is not already JSON (405 from routing, 408 from the
/// timeout layer, 413 from a length check) into the contract's shape, so no client ever has
/// to parse a second error format.
pub async fn ensure_error_shape(request: Request<Body>, next: Next) -> Response<Body> {
    let api = is_api_path(request.uri().path());
    let response = next.run(request).await;
    if !api {
        return response;
    }
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let code = match status.as_u16() {
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        413 => "payload_too_large",
        _ if status.is_server_error() => "internal_error",
        _ => "bad_request",
    };
    let message = status.canonical_reason().unwrap_or("error").to_lowercase();
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = error_body(code, &message, json!({})).to_string();
    Response::from_parts(parts, Body::from(body))
}
