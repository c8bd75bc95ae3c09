//! Doors that must hold: forged cross-site requests, and the headers every answer carries.

use app::domain::Role;
use serde_json::json;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    a_forged_cross_site_request_with_a_session_cookie_changes_nothing,
    every_answer_carries_the_security_headers,
    five_failed_sign_ins_lock_the_name_and_the_address_with_429,
);

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
    for path in ["/login", "/healthz", "/v1/nothing"] {
        let response = client.get(path).await;
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
        assert_eq!(
            headers["content-security-policy"], "frame-ancestors 'none'",
            "{path}"
        );
    }
}

async fn five_failed_sign_ins_lock_the_name_and_the_address_with_429(db: Db) {
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
    // The guesses all came from one address, which is locked out for every name.
    assert_error(
        client.login("bob", "bob's real password").await,
        429,
        "too_many_requests",
    )
    .await;
}
