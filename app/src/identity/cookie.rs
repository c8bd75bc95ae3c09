//! The session cookie, built and read in one place for the REST routes and the UI.

use chrono::Duration;
use cookie::{Cookie, SameSite};
use http::{header, HeaderMap, HeaderValue};

/// The cookie's name.
pub const SESSION_COOKIE: &str = "idem_session";

/// How the session cookie is written: always `HttpOnly` and `SameSite=Strict`, `Secure` when
/// idem is served over HTTPS.
#[derive(Debug, Clone, Copy)]
pub struct SessionCookie {
    pub secure: bool,
}

impl SessionCookie {
    /// A `Set-Cookie` value that stores the token for `lifetime`.
    pub fn set(&self, token: &str, lifetime: Duration) -> HeaderValue {
        let max_age = cookie::time::Duration::seconds(lifetime.num_seconds());
        self.header(Cookie::build((SESSION_COOKIE, token.to_owned())).max_age(max_age))
    }

    /// A `Set-Cookie` value that makes the browser forget the session.
    pub fn clear(&self) -> HeaderValue {
        self.header(Cookie::build((SESSION_COOKIE, "")).max_age(cookie::time::Duration::ZERO))
    }

    /// The session token sent by the browser, if any.
    pub fn read(headers: &HeaderMap) -> Option<String> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|cookie| cookie.name() == SESSION_COOKIE && !cookie.value().is_empty())
            .map(|cookie| cookie.value().to_owned())
    }

    fn header(&self, builder: cookie::CookieBuilder<'static>) -> HeaderValue {
        let cookie = builder
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(self.secure)
            .build();
        HeaderValue::from_str(&cookie.to_string())
            .expect("a cookie of URL-safe text is a valid header")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_when_asked() {
        let plain = SessionCookie { secure: false }.set("tok", Duration::hours(1));
        let plain = plain.to_str().unwrap();
        assert!(plain.starts_with("idem_session=tok"));
        for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=3600"] {
            assert!(plain.contains(part), "{plain} lacks {part}");
        }
        assert!(!plain.contains("Secure"));
        let secure = SessionCookie { secure: true }.set("tok", Duration::hours(1));
        assert!(secure.to_str().unwrap().contains("Secure"));
    }

    #[test]
    fn the_token_is_read_among_other_cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; idem_session=xyz; b=2"),
        );
        assert_eq!(SessionCookie::read(&headers).as_deref(), Some("xyz"));
        headers.insert(header::COOKIE, HeaderValue::from_static("idem_session="));
        assert_eq!(SessionCookie::read(&headers), None);
    }
}
