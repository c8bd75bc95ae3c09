//! People settle what agents could not: `resolve`, `expire`, and the refusals of
//! `reconcile` that need no provider. Each is a manual intervention, audited with who and why.

use app::domain::Role;
use serde_json::{json, Value};
use std::time::Duration;

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    an_operator_resolves_an_unknown_operation_and_retries_replay_it,
    a_resolution_needs_a_reason_and_an_open_operation,
    a_late_completion_after_a_resolution_is_refused,
    expiring_a_settled_key_lets_the_next_claim_start_afresh,
    an_open_operation_cannot_be_expired,
    reconcile_refuses_what_it_cannot_settle,
    an_unknown_settled_after_its_ttl_replays_for_a_whole_ttl_more,
);

impl Client {
    pub async fn resolve(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/resolve"), body)
            .await
    }

    pub async fn expire(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/expire"), body)
            .await
    }

    pub async fn reconcile(&self, id: &str) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/reconcile"), &json!({}))
            .await
    }

    /// The kinds of the operation's audit trail, oldest first, with the events.
    pub async fn event_kinds(&self, id: &str) -> (Vec<String>, Vec<Value>) {
        let body: Value = self.events(id).await.json().await.unwrap();
        let events = body["events"].as_array().unwrap().clone();
        let kinds = events
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect();
        (kinds, events)
    }
}

fn email(n: u32) -> Value {
    json!({ "tool": "send_email", "key": format!("email:{n}"), "args": { "to": "a@example.com", "n": n } })
}

/// Claims, then reports `unknown`; returns the operation id.
async fn unknown_operation(agent: &Client, body: &Value) -> String {
    let (id, token, _) = agent.start(body).await;
    let response = agent
        .mark_unknown(&id, &json!({ "lease_token": token, "error": { "code": "timeout", "message": "no answer" } }))
        .await;
    assert_eq!(response.status(), 200);
    id
}

async fn an_operator_resolves_an_unknown_operation_and_retries_replay_it(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let id = unknown_operation(&agent, &email(1)).await;
    assert_error(
        agent.claim(&email(1)).await,
        409,
        "operation_outcome_unknown",
    )
    .await;

    let resolution = json!({ "outcome": "succeeded", "result": { "message_id": "m-1" }, "reason": "the mail server logged it" });
    let response = operator.resolve(&id, &resolution).await;
    assert_eq!(response.status(), 200);
    let resolved: Value = response.json().await.unwrap();
    assert_eq!(resolved["operation"]["status"], "succeeded");
    assert_eq!(
        resolved["operation"]["result"],
        json!({ "message_id": "m-1" })
    );

    let replay = agent.claim(&email(1)).await;
    assert_eq!(replay.status(), 200);
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["replayed"], true);
    assert_eq!(
        replay["operation"]["result"],
        json!({ "message_id": "m-1" })
    );

    let (kinds, events) = agent.event_kinds(&id).await;
    assert_eq!(
        kinds,
        [
            "claimed",
            "marked_unknown",
            "blocked_unknown",
            "resolved",
            "replayed"
        ]
    );
    let resolved = &events[3];
    assert!(resolved["actor"]
        .as_str()
        .unwrap()
        .starts_with("user:operator-"));
    assert_eq!(resolved["detail"]["reason"], "the mail server logged it");
    assert_eq!(resolved["detail"]["previous_status"], "unknown");

    // The audit of people has it too, with where it came from.
    let admin = app.person(Role::Admin).await;
    let audit: Value = admin.audit("").await.json().await.unwrap();
    let entry = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "operation.resolved")
        .unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(entry["subject"], format!("operation:{id}"));
    assert_eq!(entry["detail"]["reason"], "the mail server logged it");
    assert_eq!(entry["address"], "127.0.0.1");
}

async fn a_resolution_needs_a_reason_and_an_open_operation(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let viewer = app.person(Role::Viewer).await;
    let id = unknown_operation(&agent, &email(2)).await;

    let no_reason = json!({ "outcome": "failed" });
    assert_error(
        operator.resolve(&id, &no_reason).await,
        400,
        "missing_reason",
    )
    .await;
    let bad_outcome = json!({ "outcome": "maybe", "reason": "r" });
    assert_error(
        operator.resolve(&id, &bad_outcome).await,
        400,
        "invalid_request",
    )
    .await;
    let failed =
        json!({ "outcome": "failed", "reason": "the provider refused it", "retryable": true });
    assert_error(viewer.resolve(&id, &failed).await, 403, "forbidden").await;
    assert_error(agent.resolve(&id, &failed).await, 403, "forbidden").await;
    let (kinds, _) = agent.event_kinds(&id).await;
    assert_eq!(
        kinds,
        ["claimed", "marked_unknown"],
        "refusals change nothing"
    );

    let response = operator.resolve(&id, &failed).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["operation"]["status"], "failed");
    assert_eq!(body["operation"]["retryable"], true);
    assert_eq!(body["operation"]["error"]["code"], "resolved_by_operator");
    assert_error(
        operator.resolve(&id, &failed).await,
        409,
        "operation_already_final",
    )
    .await;

    // Retryable: the next claim runs it again, as attempt 2.
    let (_, _, again) = agent.start(&email(2)).await;
    assert_eq!(again["operation"]["attempt"], 2);
}

async fn a_late_completion_after_a_resolution_is_refused(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let (id, token, _) = agent.start(&email(3)).await;
    let resolution = json!({ "outcome": "failed", "reason": "the run was cancelled" });
    assert_eq!(operator.resolve(&id, &resolution).await.status(), 200);
    let late = json!({ "lease_token": token, "outcome": "succeeded", "result": {} });
    assert_error(
        agent.complete(&id, &late).await,
        409,
        "operation_already_final",
    )
    .await;
    let stored: Value = agent.operation(&id).await.json().await.unwrap();
    assert_eq!(stored["operation"]["status"], "failed");
}

async fn expiring_a_settled_key_lets_the_next_claim_start_afresh(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let (id, token, _) = agent.start(&email(4)).await;
    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": { "n": 1 } });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    assert_eq!(agent.claim(&email(4)).await.status(), 200, "replayed");

    assert_error(
        operator.expire(&id, &json!({})).await,
        400,
        "missing_reason",
    )
    .await;
    let response = operator
        .expire(
            &id,
            &json!({ "reason": "the customer asked for a second email" }),
        )
        .await;
    assert_eq!(response.status(), 200);

    let (new_id, _, fresh) = agent.start(&email(4)).await;
    assert_ne!(new_id, id, "a brand-new operation");
    assert_eq!(fresh["operation"]["attempt"], 1);
    let old: Value = agent.operation(&id).await.json().await.unwrap();
    assert_eq!(
        old["operation"]["status"], "succeeded",
        "the old one stays as history"
    );
    let (kinds, events) = agent.event_kinds(&id).await;
    assert!(kinds.contains(&"expired".to_owned()), "{kinds:?}");
    let expired = events.iter().find(|e| e["kind"] == "expired").unwrap();
    assert_eq!(
        expired["detail"]["reason"],
        "the customer asked for a second email"
    );
}

async fn an_open_operation_cannot_be_expired(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let (pending, _, _) = agent.start(&email(5)).await;
    let reason = json!({ "reason": "try again" });
    assert_error(
        operator.expire(&pending, &reason).await,
        409,
        "invalid_transition",
    )
    .await;
    let unknown = unknown_operation(&agent, &email(6)).await;
    assert_error(
        operator.expire(&unknown, &reason).await,
        409,
        "invalid_transition",
    )
    .await;
    assert_error(agent.claim(&email(5)).await, 409, "operation_in_progress").await;
}

async fn reconcile_refuses_what_it_cannot_settle(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let (pending, _, _) = agent.start(&email(7)).await;
    assert_error(
        operator.reconcile(&pending).await,
        409,
        "operation_not_unknown",
    )
    .await;
    // send_email has no executor, so nobody can be asked: a person must resolve it.
    let unknown = unknown_operation(&agent, &email(8)).await;
    assert_error(operator.reconcile(&unknown).await, 409, "not_reconcilable").await;
    assert_error(agent.reconcile(&unknown).await, 403, "forbidden").await;
    let missing = uuid::Uuid::now_v7();
    assert_error(
        operator.reconcile(&missing.to_string()).await,
        404,
        "not_found",
    )
    .await;
}

fn time_of(operation: &Value, field: &str) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(operation[field].as_str().unwrap()).unwrap()
}

/// API.md: an `unknown` operation never expires by TTL; it "must settle first, then the TTL
/// counts". One settled after its TTL (counted from its creation) had run out still replays
/// its outcome for a whole TTL: the retry right after the settlement must not act again.
async fn an_unknown_settled_after_its_ttl_replays_for_a_whole_ttl_more(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": "non_idempotent_write", "ttl_seconds": 2 });
    assert_eq!(admin.put_tool("send_email", &policy).await.status(), 200);
    let agent = app.agent("support").await;
    let operator = app.person(Role::Operator).await;
    let id = unknown_operation(&agent, &email(1)).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;

    let resolution = json!({ "outcome": "succeeded", "result": { "message_id": "m-1" }, "reason": "the mail server logged it" });
    let resolved = operator.resolve(&id, &resolution).await;
    assert_eq!(resolved.status(), 200);
    let resolved: Value = resolved.json().await.unwrap();
    let operation = &resolved["operation"];
    assert_eq!(
        time_of(operation, "expires_at") - time_of(operation, "completed_at"),
        chrono::Duration::seconds(2),
        "{operation}"
    );
    let retry = agent.claim(&email(1)).await;
    assert_eq!(
        retry.status(),
        200,
        "the retry after the settlement replays"
    );
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry["operation"]["id"], id.as_str());
    assert_eq!(retry["operation"]["result"], json!({ "message_id": "m-1" }));

    tokio::time::sleep(Duration::from_millis(2200)).await;
    let (later, _, _) = agent.start(&email(1)).await;
    assert_ne!(
        later, id,
        "a TTL after its settlement, the key starts afresh"
    );
}
