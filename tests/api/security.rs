//! Doors that must hold: forged cross-site requests, and the headers every answer carries.

use app::domain::Role;
use serde_json::json;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    a_forged_cross_site_request_with_a_session_cookie_changes_nothing,
    every_answer_carries_the_security_headers,
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
