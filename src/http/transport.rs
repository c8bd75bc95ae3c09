//! Headers that keep secrets where they belong: answers of the API and of the UI's server
//! functions are never stored by a cache (they carry API keys, lease tokens, session cookies
//! and ledger data), and a server reached over HTTPS tells browsers to stay on HTTPS.

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response};
use axum::middleware::Next;

/// `Strict-Transport-Security` for a server whose public URL is https: a year, this host only
/// (other hosts of the domain are not idem's to decide).
pub const HSTS: &str = "max-age=31536000";

/// Paths whose answers may carry a new secret or private data: the REST API and the UI's
/// server functions. Pages and static files keep their own caching.
fn is_private_path(path: &str) -> bool {
    ["/v1/", "/auth/", "/api/"]
        .iter()
        .any(|prefix| path.starts_with(prefix))
}

/// Adds `Cache-Control: no-store` to the answers of private paths that set no caching of
/// their own.
pub async fn no_store_for_private_answers(request: Request<Body>, next: Next) -> Response<Body> {
    let private = is_private_path(request.uri().path());
    let mut response = next.run(request).await;
    if private {
        response
            .headers_mut()
            .entry(header::CACHE_CONTROL)
            .or_insert(HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_and_server_functions_are_private_and_pages_are_not() {
        for path in ["/v1/keys", "/auth/login", "/api/create_api_key"] {
            assert!(is_private_path(path), "{path}");
        }
        for path in ["/", "/operations", "/pkg/idem.wasm", "/healthz", "/v1"] {
            assert!(!is_private_path(path), "{path}");
        }
    }
}
