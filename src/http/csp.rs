//! Content-Security-Policy. Pages get a policy that lets in idem's own script, WebAssembly,
//! styles and images and nothing else; inline script runs only with the nonce Leptos puts on
//! its hydration and streaming scripts, fresh for every page. Every other answer (JSON,
//! files) may load nothing at all. No answer may be framed by another page.

use axum::http::{header, HeaderValue};
use leptos::nonce::use_nonce;
use leptos::prelude::use_context;
use leptos_axum::ResponseOptions;

/// The policy of every answer that is not a rendered page.
pub const NON_PAGE_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// The policy of a page whose inline scripts carry `nonce`.
///
/// `'wasm-unsafe-eval'` lets the page compile the app's WebAssembly (it allows no `eval` of
/// script); `connect-src 'self'` is for fetching the `.wasm` file and for server functions.
pub fn page_policy(nonce: &str) -> String {
    [
        "default-src 'self'".to_owned(),
        format!("script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"),
        "style-src 'self'".to_owned(),
        "img-src 'self'".to_owned(),
        "font-src 'self'".to_owned(),
        "connect-src 'self'".to_owned(),
        "object-src 'none'".to_owned(),
        "base-uri 'none'".to_owned(),
        "form-action 'self'".to_owned(),
        "frame-ancestors 'none'".to_owned(),
    ]
    .join("; ")
}

/// Puts the page policy on the answer being rendered. Called in the Leptos context of every
/// page, after `leptos_axum` has made the page's nonce; a no-op outside a page render (static
/// files), which keeps [`NON_PAGE_POLICY`].
pub fn set_page_policy() {
    let (Some(nonce), Some(response)) = (use_nonce(), use_context::<ResponseOptions>()) else {
        return;
    };
    // The nonce is URL-safe base64, so it is always a valid header value.
    if let Ok(policy) = HeaderValue::from_str(&page_policy(&nonce)) {
        response.insert_header(header::CONTENT_SECURITY_POLICY, policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_policy_allows_only_idems_own_script_with_the_nonce() {
        let policy = page_policy("abc123");
        assert!(policy.contains("script-src 'self' 'nonce-abc123' 'wasm-unsafe-eval'"));
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert!(!policy.contains("'unsafe-eval'"), "{policy}");
        assert!(!policy.contains('*'), "{policy}");
        for directive in [
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} in {policy}");
        }
    }
}
