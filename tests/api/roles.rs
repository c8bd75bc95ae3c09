//! Every endpoint × every kind of caller → the status the contract promises. Agents can
//! never approve, manage tools, users or keys; people never act as agents; another
//! namespace's operation does not exist for an agent.

use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    every_endpoint_answers_every_caller_as_the_contract_says,
    the_role_is_checked_before_the_body_is_read,
);

/// The callers, in the order of the expected statuses below.
const CALLERS: [&str; 7] = [
    "nobody",
    "agent of A",
    "agent of B",
    "viewer",
    "operator",
    "approver",
    "admin",
];

async fn send(client: &Client, method: &str, path: &str, body: &Value) -> u16 {
    let url = client.url(path);
    let request = match method {
        "GET" => client.http.get(url),
        "POST" => client.http.post(url).json(body),
        "PUT" => client.http.put(url).json(body),
        "DELETE" => client.http.delete(url),
        other => unreachable!("{other}"),
    };
    request.send().await.unwrap().status().as_u16()
}

async fn every_endpoint_answers_every_caller_as_the_contract_says(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent_a = app.agent("ns-a").await;
    let callers = [
        app.anonymous(),
        agent_a,
        app.agent("ns-b").await,
        app.person(Role::Viewer).await,
        app.person(Role::Operator).await,
        app.person(Role::Approver).await,
        app.person(Role::Admin).await,
    ];
    let (id, _, _) = callers[1]
        .start(&json!({ "tool": "t", "key": "k", "args": {} }))
        .await;
    let op = format!("/v1/operations/{id}");
    let unknown_key = uuid::Uuid::new_v4();

    // Each row: method, path, body, then the status per caller in CALLERS order. Rows that
    // change something come last or use a fresh key so one caller's success cannot change
    // the next caller's answer.
    let rows: Vec<(&str, String, Value, [u16; 7])> = vec![
        (
            "GET",
            "/healthz".into(),
            json!({}),
            [200, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/v1/openapi.json".into(),
            json!({}),
            [200, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/auth/me".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/v1/operations".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        // A stream never ends: only the status of its headers is read.
        (
            "GET",
            "/v1/operations/changes".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            op.clone(),
            json!({}),
            [401, 200, 404, 200, 200, 200, 200],
        ),
        (
            "GET",
            format!("{op}/events"),
            json!({}),
            [401, 200, 404, 200, 200, 200, 200],
        ),
        (
            "POST",
            format!("{op}/complete"),
            json!({ "lease_token": "x", "outcome": "succeeded" }),
            [401, 409, 404, 403, 403, 403, 403],
        ),
        (
            "POST",
            format!("{op}/unknown"),
            json!({ "lease_token": "x" }),
            [401, 409, 404, 403, 403, 403, 403],
        ),
        (
            "POST",
            format!("{op}/approve"),
            json!({}),
            [401, 403, 403, 403, 403, 409, 409],
        ),
        (
            "POST",
            format!("{op}/reject"),
            json!({ "reason": "no" }),
            [401, 403, 403, 403, 403, 409, 409],
        ),
        (
            "POST",
            format!("{op}/reconcile"),
            json!({}),
            [401, 403, 403, 403, 409, 403, 409],
        ),
        // Without a reason: the role is checked first, then the body (400), so nothing
        // changes for the rows after.
        (
            "POST",
            format!("{op}/resolve"),
            json!({ "outcome": "failed" }),
            [401, 403, 403, 403, 400, 403, 400],
        ),
        (
            "POST",
            format!("{op}/expire"),
            json!({}),
            [401, 403, 403, 403, 400, 403, 400],
        ),
        (
            "POST",
            "/v1/tools/t/invoke".into(),
            json!({ "key": "k-invoke", "args": {} }),
            [401, 400, 400, 403, 403, 403, 403],
        ),
        (
            "GET",
            "/v1/metrics".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/v1/metrics?namespace=ns-a".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/metrics".into(),
            json!({}),
            [200, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/v1/tools".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "GET",
            "/v1/tools/t".into(),
            json!({}),
            [401, 200, 200, 200, 200, 200, 200],
        ),
        (
            "PUT",
            "/v1/tools/t".into(),
            json!({ "effect": "read_only" }),
            [401, 403, 403, 403, 403, 403, 200],
        ),
        (
            "GET",
            "/v1/keys".into(),
            json!({}),
            [401, 403, 403, 403, 403, 403, 200],
        ),
        (
            "POST",
            "/v1/keys".into(),
            json!({ "namespace": "ns-c" }),
            [401, 403, 403, 403, 403, 403, 201],
        ),
        (
            "DELETE",
            format!("/v1/keys/{unknown_key}"),
            json!({}),
            [401, 403, 403, 403, 403, 403, 404],
        ),
        (
            "GET",
            "/v1/users".into(),
            json!({}),
            [401, 403, 403, 403, 403, 403, 200],
        ),
        (
            "GET",
            "/v1/audit".into(),
            json!({}),
            [401, 403, 403, 403, 403, 403, 200],
        ),
        (
            "POST",
            "/v1/users".into(),
            json!({ "username": "new-one", "role": "viewer", "password": "long enough pw" }),
            [401, 403, 403, 403, 403, 403, 201],
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, body, expected) in &rows {
        for (caller, (client, status)) in callers.iter().zip(expected).enumerate() {
            let actual = send(client, method, path, body).await;
            if actual != *status {
                wrong.push(format!(
                    "{method} {path} as {}: {actual}, expected {status}",
                    CALLERS[caller]
                ));
            }
        }
    }
    let claim = json!({ "tool": "t", "args": {} });
    let claim_statuses = [401, 201, 201, 403, 403, 403, 403];
    for (caller, (client, status)) in callers.iter().zip(claim_statuses).enumerate() {
        let mut body = claim.clone();
        body["key"] = json!(format!("fresh-{caller}"));
        let actual = send(client, "POST", "/v1/operations", &body).await;
        if actual != status {
            wrong.push(format!(
                "POST /v1/operations as {}: {actual}, expected {status}",
                CALLERS[caller]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A caller without the role learns 403 (or 401) whatever the body; only a caller who may
/// use the route is told that the body is malformed.
async fn the_role_is_checked_before_the_body_is_read(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("ns-a").await;
    let (id, _, _) = agent
        .start(&json!({ "tool": "t", "key": "k", "args": {} }))
        .await;
    let callers = [
        app.anonymous(),
        agent,
        app.person(Role::Viewer).await,
        app.person(Role::Operator).await,
        app.person(Role::Approver).await,
        app.person(Role::Admin).await,
    ];
    let op = format!("/v1/operations/{id}");
    // Statuses for: nobody, agent, viewer, operator, approver, admin.
    let rows = [
        (
            "POST",
            format!("{op}/approve"),
            [401, 403, 403, 403, 400, 400],
        ),
        (
            "POST",
            format!("{op}/reject"),
            [401, 403, 403, 403, 400, 400],
        ),
        (
            "POST",
            format!("{op}/resolve"),
            [401, 403, 403, 400, 403, 400],
        ),
        (
            "POST",
            format!("{op}/expire"),
            [401, 403, 403, 400, 403, 400],
        ),
        ("POST", "/v1/keys".into(), [401, 403, 403, 403, 403, 400]),
        ("POST", "/v1/users".into(), [401, 403, 403, 403, 403, 400]),
        ("PUT", "/v1/tools/t".into(), [401, 403, 403, 403, 403, 400]),
    ];
    let mut wrong = Vec::new();
    for (method, path, expected) in &rows {
        for (client, status) in callers.iter().zip(expected) {
            let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let response = client
                .http
                .request(method.clone(), client.url(path))
                .header("content-type", "application/json")
                .body("{\"reason\": ")
                .send()
                .await
                .unwrap();
            let actual = response.status().as_u16();
            if actual != *status {
                let who = client.me().await.text().await.unwrap();
                wrong.push(format!(
                    "{method} {path} as {who}: {actual}, expected {status}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
