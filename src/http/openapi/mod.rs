//! `GET /v1/openapi.json`: the REST contract as OpenAPI 3, generated from the handlers'
//! `#[utoipa::path]` annotations and the types they read and answer, so it cannot drift
//! from the code. Public, like `/healthz`: it holds no data.

use std::sync::LazyLock;

use app::identity::SESSION_COOKIE;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::OpenApi as Document;
use utoipa::{Modify, OpenApi};

use serde_json::Value;

use super::json::AppJson;
use super::{admin, audit, auth, health, invoke, metrics, operations, tools};
use crate::startup::AppState;

mod exact;

/// Every REST route; `tests/api/openapi.rs` checks that none is missing.
#[derive(OpenApi)]
#[openapi(
    info(description = "The idempotency ledger for tool-calling AI agents.

Every body is JSON; times are RFC 3339 UTC. Every error, whatever its status, is \
`{\"error\": {\"code\", \"message\", \"details\"}}`. Besides the statuses listed per \
operation, any request may be answered `405 method_not_allowed`, `408 request_timeout` \
or `500 internal_error` in that shape, a request with an API key over its rate limit \
`429 too_many_requests` with `Retry-After`, and every answer carries `x-request-id`."),
    paths(
        health::healthz,
        health::readyz,
        auth::login,
        auth::logout,
        auth::me,
        auth::change_password,
        admin::create_key,
        admin::list_keys,
        admin::revoke_key,
        admin::create_user,
        admin::list_users,
        admin::update_user,
        admin::delete_user,
        audit::list,
        operations::claim,
        operations::list,
        operations::export,
        operations::read,
        operations::events,
        operations::changes,
        operations::complete,
        operations::unknown,
        operations::approve,
        operations::reject,
        operations::reconcile,
        operations::resolve,
        operations::expire,
        invoke::invoke,
        tools::list,
        tools::read,
        tools::register,
        metrics::metrics,
        metrics::tools,
        metrics::prometheus,
        openapi_json,
    ),
    components(schemas(app::ledger::OperationChange)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "operations", description = "Claim, complete, report and read operations"),
        (name = "tools", description = "The tool registry and the promise kept for each tool"),
        (name = "auth", description = "Sessions of people, and who is calling"),
        (name = "metrics", description = "What idem prevented and what waits; Prometheus counters"),
        (name = "admin", description = "API keys, people and the audit log (admin only)"),
        (name = "health", description = "Liveness and readiness"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

/// The two ways in: agents send an API key, people carry a session cookie.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "An agent's API key, `Authorization: Bearer <key>`; it belongs to one namespace",
            ))
            .build();
        components.add_security_scheme("api_key", SecurityScheme::Http(bearer));
        let cookie = ApiKeyValue::with_description(
            SESSION_COOKIE,
            "A person's session, set by `POST /auth/login`",
        );
        components.add_security_scheme("session", SecurityScheme::ApiKey(ApiKey::Cookie(cookie)));
    }
}

/// Built once: the document never changes while the process runs.
static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
    let mut document =
        serde_json::to_value(ApiDoc::openapi()).expect("an OpenAPI document is JSON");
    exact::state_name_patterns(&mut document);
    exact::state_field_rules(&mut document);
    exact::state_query_rules(&mut document);
    exact::list_common_answers(&mut document);
    document
});

/// `/v1/openapi.json`.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/openapi.json", get(openapi_json))
}

/// This contract as OpenAPI 3.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "meta",
    responses((status = 200, description = "An OpenAPI 3 document", body = Object))
)]
async fn openapi_json() -> AppJson<&'static Value> {
    AppJson(&DOCUMENT)
}
