//! Cross-site request forgery: a browser sends the session cookie with any request, even
//! one a foreign page makes it send, so a state change that is not authenticated by an API
//! key must come from idem's own pages. Browsers say where a request comes from
//! (`Sec-Fetch-Site`, `Origin`); a request that says it comes from elsewhere is refused.
//! Clients that say nothing (curl, scripts) are no browser, and cannot be forged into
//! sending a victim's cookie.

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Refuses unsafe requests that a browser marks as coming from another site.
pub async fn refuse_cross_site(request: Request<Body>, next: Next) -> Response {
    let unsafe_method = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if unsafe_method && !is_api_key_only(request.headers()) && is_cross_site(request.headers()) {
        tracing::warn!(path = %request.uri().path(), "refused a cross-site state change");
        return ApiError::CrossSite.into_response();
    }
    next.run(request).await
}

/// A request authenticated by an API key alone: no browser sends one on its own. One that
/// also carries a session cookie is checked like any browser's, since the cookie may be what
/// authenticates it.
fn is_api_key_only(headers: &HeaderMap) -> bool {
    has_bearer(headers) && app::identity::SessionCookie::read(headers).is_none()
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.len() > 7 && value[..7].eq_ignore_ascii_case("bearer "))
}

/// `Sec-Fetch-Site` when the browser sends it (all current ones do), else `Origin` against
/// `Host`.
fn is_cross_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return !matches!(site, "same-origin" | "none");
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, rest)| rest);
    origin == "null" || origin_host != host
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn where_a_request_comes_from() {
        let cases: [(&[(&str, &str)], bool); 8] = [
            (&[], false),
            (&[("sec-fetch-site", "same-origin")], false),
            (&[("sec-fetch-site", "none")], false),
            (&[("sec-fetch-site", "cross-site")], true),
            (&[("sec-fetch-site", "same-site")], true),
            (
                &[
                    ("origin", "http://idem.local:3000"),
                    ("host", "idem.local:3000"),
                ],
                false,
            ),
            (
                &[
                    ("origin", "https://evil.example"),
                    ("host", "idem.local:3000"),
                ],
                true,
            ),
            (&[("origin", "null"), ("host", "idem.local:3000")], true),
        ];
        for (pairs, cross) in cases {
            assert_eq!(is_cross_site(&headers(pairs)), cross, "{pairs:?}");
        }
    }
}
