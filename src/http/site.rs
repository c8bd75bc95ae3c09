//! The whole site's router: the API, the pages rendered on the server, and the layers every
//! answer goes through.

use app::{shell, App};
use axum::body::Body;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::routing::any;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use std::sync::OnceLock;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::config::ServeConfig;
use crate::startup::AppState;

/// The UI's routes, generated once per process. Generating them renders the app while
/// leptos_server suppresses resource loads through a flag global to the process
/// (`SuppressResourceLoad`); a resource that another server in the same process first polls
/// in that moment waits forever (leptos issue #4773: the page hung until the request
/// timeout). One `idem serve` generates once before it serves; tests and `idem-bench` run
/// many servers in one process, and the list is the same for all of them.
fn ui_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The whole site: the API, the pages, and what every answer goes through.
pub(crate) fn router(state: AppState, config: &ServeConfig) -> Router {
    let ui_context = {
        let state = state.clone();
        move || {
            provide_context(state.identity.clone());
            provide_context(state.audit.clone());
            provide_context(state.ledger.clone());
            provide_context(state.metrics.clone());
            provide_context(state.people_actions.clone());
            provide_context(state.admin_actions.clone());
            provide_context(state.session_cookie);
            super::csp::set_page_policy();
        }
    };
    let routes = ui_routes();
    let shell_options = state.leptos_options.clone();
    let ui = Router::new()
        .leptos_routes_with_context(&state, routes, ui_context.clone(), move || {
            shell(shell_options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(ui_context, shell));

    let routes = Router::new()
        .merge(super::router(config.max_body_bytes))
        // Unknown API paths answer in the API's shape, not with the UI's 404 page.
        .route("/v1/{*rest}", any(super::not_found))
        .route("/auth/{*rest}", any(super::not_found))
        .merge(ui)
        .with_state(state);
    let routes = around(routes, Duration::from_secs(config.request_timeout_secs));
    if config.serves_https() {
        routes.layer(SetResponseHeaderLayer::if_not_present(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(super::transport::HSTS),
        ))
    } else {
        routes
    }
}

/// What every answer goes through, from the outside in: tracing and request ids, the
/// headers every answer carries, the API's error shape, the cross-site check, a panic turned
/// into a 500 (instead of a dropped connection), and the request timeout.
fn around(routes: Router, request_timeout: Duration) -> Router {
    routes
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            request_timeout,
        ))
        .layer(CatchPanicLayer::new())
        .layer(axum::middleware::from_fn(super::csrf::refuse_cross_site))
        .layer(axum::middleware::from_fn(super::ensure_error_shape))
        .layer(axum::middleware::from_fn(
            super::transport::no_store_for_private_answers,
        ))
        // Every answer: no MIME sniffing, no referrer leaking ids to other sites, and no
        // framing by other pages (clickjacking an approval button). Pages set their own,
        // fuller CSP while rendering (`super::csp`); this one is for everything else.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(super::csp::NON_PAGE_POLICY),
        ))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// One span per request, carrying the request id that is also returned in `x-request-id`.
fn request_span(request: &Request<Body>) -> tracing::Span {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler that panics answers 500 in the contract's error shape; without the layer
    /// the connection would just drop.
    #[tokio::test]
    async fn a_panic_answers_500_in_the_error_shape() {
        use tower::ServiceExt;
        let panicking = Router::new().route(
            "/v1/panics",
            axum::routing::get(|| async {
                panic!("a bug");
                #[allow(unreachable_code)]
                ""
            }),
        );
        let request = Request::get("/v1/panics").body(Body::empty()).unwrap();
        let response = around(panicking, Duration::from_secs(5))
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "internal_error", "{body}");
    }
}
