//! Doors that must hold: forged cross-site requests, and the headers every answer carries.

use app::domain::Role;
use serde_json::json;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    a_forged_cross_site_request_with_a_session_cookie_changes_nothing,
    every_answer_carries_the_security_headers,
    pages_run_only_their_own_script_and_json_answers_load_nothing,
    five_failed_sign_ins_lock_the_name_from_that_address_with_429,
    a_bearer_header_beside_a_session_cookie_does_not_exempt_a_cross_site_request,
    answers_that_carry_a_new_secret_are_never_stored,
    an_https_server_tells_browsers_to_stay_on_https,
);

async fn a_bearer_header_beside_a_session_cookie_does_not_exempt_a_cross_site_request(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let logout = admin
        .http
        .post(admin.url("/api/logout"))
        .header("sec-fetch-site", "cross-site")
        .header("authorization", "Bearer not-a-key")
        .send()
        .await
        .unwrap();
    assert_error(logout, 403, "cross_site_request").await;
    assert_eq!(admin.me().await.status(), 200, "the session lives on");
}

async fn answers_that_carry_a_new_secret_are_never_stored(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let key = admin.create_key(&json!({ "namespace": "billing" })).await;
    assert_eq!(key.status(), 201);
    assert_eq!(key.headers()["cache-control"], "no-store");

    app.create_person("ada", Role::Viewer, "a long password")
        .await;
    let login = app.anonymous().login("ada", "a long password").await;
    assert_eq!(login.status(), 200);
    assert_eq!(login.headers()["cache-control"], "no-store");

    let agent = app.agent("billing").await;
    let claimed = agent
        .post_json(
            "/v1/operations",
            &json!({ "tool": "t", "key": "k", "args": {} }),
        )
        .await;
    assert_eq!(claimed.status(), 201, "a lease token is a secret too");
    assert_eq!(claimed.headers()["cache-control"], "no-store");
}

async fn an_https_server_tells_browsers_to_stay_on_https(db: Db) {
    let plain = TestApp::spawn(db).await;
    let answer = plain.anonymous().get("/healthz").await;
    assert!(answer.headers().get("strict-transport-security").is_none());

    let https = TestApp::spawn_with(db, |config| {
        config.public_url = Some("https://idem.example".into());
    })
    .await;
    for path in ["/healthz", "/login", "/v1/nothing"] {
        let answer = https.anonymous().get(path).await;
        assert_eq!(
            answer.headers()["strict-transport-security"],
            "max-age=31536000",
            "{path}"
        );
    }
}

async fn a_forged_cross_site_request_with_a_session_cookie_changes_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let body = json!({ "namespace": "stolen" });
    let forged = [
        ("sec-fetch-site", "cross-site"),
        ("origin", "https://evil.example"),
    ];
    for (name, value) in forged {
        let response = admin
            .http
            .post(admin.url("/v1/keys"))
            .header(name, value)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_error(response, 403, "cross_site_request").await;
        let logout = admin
            .http
            .post(admin.url("/api/logout"))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(logout.status(), 403, "server functions are guarded too");
    }
    assert!(app.state.identity.list_api_keys().await.unwrap().is_empty());
    assert_eq!(
        admin.me().await.status(),
        200,
        "the forged logout did not end the session"
    );

    let same_origin = admin
        .http
        .post(admin.url("/v1/keys"))
        .header("sec-fetch-site", "same-origin")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), 201, "idem's own pages may");
    let agent = app.agent("billing").await;
    let from_a_page = agent
        .http
        .post(agent.url("/v1/operations"))
        .header("origin", "https://elsewhere.example");
    let claimed = from_a_page
        .json(&json!({ "tool": "t", "key": "k", "args": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        claimed.status(),
        201,
        "an API key is no ambient credential: no CSRF risk"
    );
}

async fn every_answer_carries_the_security_headers(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    for path in ["/login", "/healthz", "/v1/nothing", "/favicon.svg"] {
        let response = client.get(path).await;
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
    }
}

/// The nonce of the page's `script-src`, checking the rest of the page policy on the way.
fn page_nonce(policy: &str) -> String {
    let directives: Vec<&str> = policy.split("; ").collect();
    for expected in [
        "default-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(directives.contains(&expected), "{expected} in {policy}");
    }
    let script = directives
        .iter()
        .find_map(|d| d.strip_prefix("script-src "))
        .unwrap_or_else(|| panic!("no script-src in {policy}"));
    let sources: Vec<&str> = script.split(' ').collect();
    assert_eq!(sources.len(), 3, "{script}");
    assert_eq!(sources[0], "'self'");
    assert_eq!(sources[2], "'wasm-unsafe-eval'");
    sources[1]
        .strip_prefix("'nonce-")
        .and_then(|n| n.strip_suffix('\''))
        .unwrap_or_else(|| panic!("no nonce in {script}"))
        .to_owned()
}

async fn pages_run_only_their_own_script_and_json_answers_load_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    let viewer = app.person(Role::Viewer).await;
    let mut nonces = Vec::new();
    let pages = [
        (&client, "/login"),
        (&client, "/login"),
        (&client, "/no-such-page"),
        (&viewer, "/"),
    ];
    for (client, path) in pages {
        let response = client.get_page(path).await;
        assert!(!response.status().is_redirection(), "{path}: a page");
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        let nonce = page_nonce(&policy);
        let html = response.text().await.unwrap();
        let script = format!("<script type=\"module\" nonce=\"{nonce}\">");
        assert!(
            html.contains(&script),
            "{path}: the hydration script carries the nonce"
        );
        assert_eq!(
            html.matches("<script").count(),
            html.matches(&format!("nonce=\"{nonce}\"")).count(),
            "{path}: every script carries the nonce"
        );
        // `style-src 'self'` has no 'unsafe-inline': the pages must not need inline styles.
        assert!(
            !html.contains(" style=") && !html.contains("<style"),
            "{path}"
        );
        nonces.push(nonce);
    }
    assert_ne!(nonces[0], nonces[1], "a fresh nonce for every page");

    for path in ["/healthz", "/v1/nothing", "/v1/openapi.json", "/auth/me"] {
        let response = client.get(path).await;
        assert_eq!(
            response.headers()["content-security-policy"],
            "default-src 'none'; frame-ancestors 'none'",
            "{path}"
        );
    }
}

async fn five_failed_sign_ins_lock_the_name_from_that_address_with_429(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Approver, "ada's real password")
        .await;
    app.create_person("bob", Role::Viewer, "bob's real password")
        .await;
    let client = app.anonymous();
    for _ in 0..5 {
        assert_error(client.login("ada", "a guess").await, 401, "unauthorized").await;
    }
    let locked = client.login("ada", "ada's real password").await;
    let retry_after: u64 = locked.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=900).contains(&retry_after), "{retry_after}");
    assert_error(locked, 429, "too_many_requests").await;
    // The address has a larger budget of its own: one person's lockout leaves the others
    // there alone (#28 §4).
    assert_eq!(
        client.login("bob", "bob's real password").await.status(),
        200
    );
}
