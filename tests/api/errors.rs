use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    malformed_json_is_400_not_422,
    wrong_types_and_missing_fields_are_400,
    a_body_without_a_json_content_type_is_415,
    a_body_over_the_limit_is_413,
    unknown_api_paths_and_wrong_methods_answer_in_the_error_shape,
    health_and_readiness_answer,
    every_response_carries_a_request_id,
);

async fn malformed_json_is_400_not_422(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    for body in ["{", "not json", "{\"username\": }", ""] {
        let response = client
            .post_raw("/auth/login", body, Some("application/json"))
            .await;
        assert_error(response, 400, "malformed_json").await;
    }
}

async fn wrong_types_and_missing_fields_are_400(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let cases = [
        r#"{"username": 7, "password": "x"}"#,
        r#"{"username": "ada"}"#,
        r#""just a string""#,
        r#"{"username": null, "password": "x"}"#,
    ];
    for body in cases {
        let response = admin
            .post_raw("/auth/login", body, Some("application/json"))
            .await;
        assert_error(response, 400, "invalid_request").await;
    }
    let response = admin
        .post_raw(
            "/v1/keys",
            r#"{"namespace": ["a"]}"#,
            Some("application/json"),
        )
        .await;
    assert_error(response, 400, "invalid_request").await;
    assert!(app.state.identity.list_api_keys().await.unwrap().is_empty());

    // A tool named in the path is checked as a body's `tool` is.
    let agent = app.agent("billing").await;
    let invoked = agent
        .post_json(
            "/v1/tools/no%20spaces/invoke",
            &json!({ "key": "k", "args": {} }),
        )
        .await;
    assert_error(invoked, 400, "invalid_tool_name").await;
}

async fn a_body_without_a_json_content_type_is_415(db: Db) {
    let app = TestApp::spawn(db).await;
    let response = app
        .anonymous()
        .post_raw(
            "/auth/login",
            r#"{"username":"a","password":"b"}"#,
            Some("text/plain"),
        )
        .await;
    assert_error(response, 415, "unsupported_media_type").await;
    let response = app
        .anonymous()
        .post_raw("/auth/login", r#"{"username":"a","password":"b"}"#, None)
        .await;
    assert_error(response, 415, "unsupported_media_type").await;
}

async fn a_body_over_the_limit_is_413(db: Db) {
    let app = TestApp::spawn_with(db, |config| config.max_body_bytes = 1024).await;
    let admin = app.person(Role::Admin).await;
    let big = format!(r#"{{"namespace": "ok", "name": "{}"}}"#, "x".repeat(2048));
    assert_error(
        admin
            .post_raw("/v1/keys", big, Some("application/json"))
            .await,
        413,
        "payload_too_large",
    )
    .await;
    assert!(app.state.identity.list_api_keys().await.unwrap().is_empty());
}

async fn unknown_api_paths_and_wrong_methods_answer_in_the_error_shape(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    assert_error(client.get("/v1/nothing-here").await, 404, "not_found").await;
    assert_error(client.get("/auth/nothing-here").await, 404, "not_found").await;
    // The prefixes alone fall through to the pages' 404, and still answer as the API does.
    assert_error(client.get("/v1/").await, 404, "not_found").await;
    assert_error(client.get("/auth/").await, 404, "not_found").await;
    let wrong_method = client
        .http
        .put(client.url("/auth/login"))
        .send()
        .await
        .unwrap();
    assert_error(wrong_method, 405, "method_not_allowed").await;
}

async fn health_and_readiness_answer(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    let health: Value = client.get("/healthz").await.json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let ready = client.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.json::<Value>().await.unwrap()["status"], "ready");

    app.state.database.close().await;
    assert_error(client.get("/readyz").await, 503, "service_unavailable").await;
    assert_eq!(
        client.get("/healthz").await.status(),
        200,
        "the process itself is still up"
    );
}

async fn every_response_carries_a_request_id(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    let first = client.get("/healthz").await;
    let second = client.get("/healthz").await;
    let id = |r: &reqwest::Response| r.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_ne!(id(&first), id(&second));
    let given = client
        .http
        .get(client.url("/healthz"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(id(&given), "trace-me-42");
}
