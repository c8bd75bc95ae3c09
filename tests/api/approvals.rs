//! Irreversible actions wait for a person: approve once, or reject with a reason the agent
//! is told.

use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    an_approval_lets_exactly_one_claim_execute,
    a_rejection_is_final_and_replayed_with_who_and_why,
    only_approvers_and_admins_decide,
    a_verdict_needs_an_operation_that_waits,
    an_unanswered_request_lapses_into_a_rejection,
    a_verdict_may_come_without_a_body,
    an_approval_page_is_only_for_requests_for_approval,
);

impl Client {
    pub async fn approve(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/approve"), body)
            .await
    }

    pub async fn reject(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/reject"), body)
            .await
    }
}

fn wire(amount: u64) -> Value {
    json!({ "tool": "wire_transfer", "key": "wire-1", "args": { "amount_cents": amount, "to": "DE89" } })
}

/// An app with an irreversible tool, an agent, and the id of one waiting operation.
async fn waiting_wire(db: Db) -> (TestApp, Client, String) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": "irreversible" });
    let registered = admin.put_tool("wire_transfer", &policy).await;
    assert_eq!(registered.status(), 200);
    let agent = app.agent("treasury").await;
    let waiting = agent.claim(&wire(100_000)).await;
    assert_eq!(waiting.status(), 202);
    let id = waiting.json::<Value>().await.unwrap()["operation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (app, agent, id)
}

async fn an_approval_lets_exactly_one_claim_execute(db: Db) {
    let (app, agent, id) = waiting_wire(db).await;
    let approver = app.person(Role::Approver).await;
    let approved = approver
        .approve(&id, &json!({ "reason": "expected payout" }))
        .await;
    assert_eq!(approved.status(), 200);
    let approved: Value = approved.json().await.unwrap();
    assert_eq!(approved["operation"]["status"], "approved");
    assert_eq!(approved["operation"]["approval"]["decision"], "approved");
    assert!(approved["operation"]["approval"]["decided_by"]
        .as_str()
        .unwrap()
        .starts_with("approver-"));

    let mut other_args = wire(999_999);
    other_args["key"] = json!("wire-1");
    assert_error(
        agent.claim(&other_args).await,
        422,
        "idempotency_key_reused",
    )
    .await;

    let (same_id, token, started) = agent.start(&wire(100_000)).await;
    assert_eq!(same_id, id);
    assert_eq!(started["operation"]["attempt"], 1);
    assert_error(
        agent.claim(&wire(100_000)).await,
        409,
        "operation_in_progress",
    )
    .await;
    let done = json!({ "lease_token": token, "outcome": "succeeded", "provider_ref": "tr_1" });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    assert_eq!(
        agent.claim(&wire(100_000)).await.status(),
        200,
        "replayed, never executed twice"
    );

    let events: Value = agent.events(&id).await.json().await.unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        &kinds[..4],
        [
            "approval_requested",
            "approved",
            "mismatch_rejected",
            "claimed"
        ]
    );
    assert!(events["events"][1]["actor"]
        .as_str()
        .unwrap()
        .starts_with("user:approver-"));
}

async fn a_rejection_is_final_and_replayed_with_who_and_why(db: Db) {
    let (app, agent, id) = waiting_wire(db).await;
    let admin = app.person(Role::Admin).await;
    let rejected = admin
        .reject(&id, &json!({ "reason": "beneficiary not verified" }))
        .await;
    assert_eq!(rejected.status(), 200);

    let replay = agent.claim(&wire(100_000)).await;
    assert_eq!(replay.status(), 200);
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["operation"]["status"], "rejected");
    let note = replay["note"].as_str().unwrap();
    assert!(
        note.starts_with("rejected by admin-") && note.contains("beneficiary not verified"),
        "{note}"
    );
    assert_error(
        admin.approve(&id, &json!({})).await,
        409,
        "operation_not_awaiting_approval",
    )
    .await;
}

async fn only_approvers_and_admins_decide(db: Db) {
    let (app, agent, id) = waiting_wire(db).await;
    let cases = [
        (app.anonymous(), 401, "unauthorized"),
        (agent, 403, "forbidden"),
        (app.person(Role::Viewer).await, 403, "forbidden"),
        (app.person(Role::Operator).await, 403, "forbidden"),
    ];
    for (client, status, code) in &cases {
        assert_error(client.approve(&id, &json!({})).await, *status, code).await;
        assert_error(
            client.reject(&id, &json!({ "reason": "no" })).await,
            *status,
            code,
        )
        .await;
    }
    let still: Value = app
        .person(Role::Viewer)
        .await
        .operation(&id)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(still["operation"]["status"], "awaiting_approval");
}

async fn a_verdict_needs_an_operation_that_waits(db: Db) {
    let (app, agent, id) = waiting_wire(db).await;
    let approver = app.person(Role::Approver).await;
    assert_error(
        approver.reject(&id, &json!({})).await,
        400,
        "missing_reason",
    )
    .await;
    assert_error(
        approver.reject(&id, &json!({ "reason": "   " })).await,
        400,
        "missing_reason",
    )
    .await;
    assert_error(
        approver
            .approve(&uuid::Uuid::new_v4().to_string(), &json!({}))
            .await,
        404,
        "not_found",
    )
    .await;

    let (running, _, _) = agent
        .start(&json!({ "tool": "refund", "key": "r1", "args": {} }))
        .await;
    assert_error(
        approver.approve(&running, &json!({})).await,
        409,
        "operation_not_awaiting_approval",
    )
    .await;
    assert_eq!(approver.approve(&id, &json!({})).await.status(), 200);
    assert_error(
        approver.approve(&id, &json!({})).await,
        409,
        "operation_not_awaiting_approval",
    )
    .await;
}

async fn an_unanswered_request_lapses_into_a_rejection(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": "irreversible", "approval_ttl_seconds": 1 });
    let registered = admin.put_tool("wire_transfer", &policy).await;
    assert_eq!(registered.status(), 200);
    let agent = app.agent("treasury").await;
    let mut second = wire(5);
    second["key"] = json!("wire-2");
    let first: Value = agent.claim(&wire(5)).await.json().await.unwrap();
    assert!(first["operation"]["approval_expires_at"].is_string());
    let first_id = first["operation"]["id"].as_str().unwrap().to_owned();
    let second: Value = agent.claim(&second).await.json().await.unwrap();
    let second_id = second["operation"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;

    // Found by a claim: the agent is told it was rejected because nobody answered.
    let replay = agent.claim(&wire(5)).await;
    assert_eq!(replay.status(), 200);
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["operation"]["status"], "rejected");
    assert!(
        replay["note"]
            .as_str()
            .unwrap()
            .contains("approval expired"),
        "{replay}"
    );

    // Found by a late verdict: refused, and the lapse recorded instead.
    assert_error(
        admin.approve(&second_id, &json!({})).await,
        409,
        "approval_expired",
    )
    .await;
    let lapsed: Value = admin.operation(&second_id).await.json().await.unwrap();
    assert_eq!(lapsed["operation"]["status"], "rejected");
    assert_eq!(
        lapsed["operation"]["approval"]["reason"],
        "approval expired"
    );

    // Each lapse is recorded by the system; the claim that found the first one was answered
    // with the stored rejection, a replay like any other (a duplicate prevented).
    let mut trails = Vec::new();
    for id in [&first_id, &second_id] {
        let events: Value = admin.events(id).await.json().await.unwrap();
        let trail: Vec<(String, String)> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap().into(),
                    e["actor"].as_str().unwrap().into(),
                )
            })
            .collect();
        trails.push(trail);
    }
    let kinds = |trail: &[(String, String)]| -> Vec<String> {
        trail.iter().map(|(kind, _)| kind.clone()).collect()
    };
    assert_eq!(
        kinds(&trails[0]),
        ["approval_requested", "approval_expired", "replayed"]
    );
    assert_eq!(
        kinds(&trails[1]),
        ["approval_requested", "approval_expired"]
    );
    for trail in &trails {
        assert_eq!(trail[1].1, "system");
    }
}

/// Every field of an approval is optional, so its body may be left out entirely; a rejection
/// without one is refused for its missing reason, and a body that is there is still read as
/// JSON (declared, well formed).
async fn a_verdict_may_come_without_a_body(db: Db) {
    let (app, _agent, id) = waiting_wire(db).await;
    let approver = app.person(Role::Approver).await;
    let path = |verdict: &str| format!("/v1/operations/{id}/{verdict}");
    assert_error(
        approver.post_raw(&path("reject"), "", None).await,
        400,
        "missing_reason",
    )
    .await;
    assert_error(
        approver
            .post_raw(&path("approve"), "{", Some("application/json"))
            .await,
        400,
        "malformed_json",
    )
    .await;
    assert_error(
        approver.post_raw(&path("approve"), "{}", None).await,
        415,
        "unsupported_media_type",
    )
    .await;

    let approved = approver.post_raw(&path("approve"), "", None).await;
    assert_eq!(approved.status(), 200);
    let approved: Value = approved.json().await.unwrap();
    assert_eq!(approved["operation"]["status"], "approved");
    assert_eq!(approved["operation"]["approval"]["reason"], Value::Null);
}

/// `/approvals/{id}` opens a request for approval, waiting or decided; an operation that
/// never waited for one is not a request (404), as an unknown id is.
async fn an_approval_page_is_only_for_requests_for_approval(db: Db) {
    let (app, agent, id) = waiting_wire(db).await;
    let plain = json!({ "tool": "lookup", "key": "lookup-1", "args": {} });
    let claimed = agent.post_json("/v1/operations", &plain).await;
    assert_eq!(claimed.status(), 201);
    let body: Value = claimed.json().await.unwrap();
    let plain_id = body["operation"]["id"].as_str().unwrap().to_owned();
    let approver = app.person(Role::Approver).await;

    let page = |path: String| {
        let approver = &approver;
        async move {
            let response = approver.get_page(&path).await;
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, html) = page(format!("/approvals/{id}")).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("wire_transfer") && html.contains("DE89"),
        "{html}"
    );
    let (status, _) = page(format!("/approvals/{plain_id}")).await;
    assert_eq!(status, 404, "a plain operation is no request for approval");

    let approved = approver.approve(&id, &json!({})).await;
    assert_eq!(approved.status(), 200);
    let (status, html) = page(format!("/approvals/{id}")).await;
    assert_eq!(status, 200, "a decided request still has its page: {html}");
}
