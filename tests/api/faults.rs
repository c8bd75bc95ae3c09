//! The ambiguous moments, with a real provider (the sandbox) and injected faults. Each test
//! asserts the same three things: the provider counted the effect exactly once, the ledger
//! converged to the truth, and the audit trail tells what happened.

use serde_json::{json, Value};
use std::time::Duration;

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;
use crate::sandbox_helpers::TestSandbox;

on_both_databases!(
    a_provider_that_commits_then_times_out_is_reconciled_to_one_success,
    the_same_message_delivered_twice_takes_effect_once,
    the_same_message_delivered_concurrently_takes_effect_once,
    a_lease_that_runs_out_during_a_slow_call_never_runs_it_twice,
    a_call_idem_runs_is_never_outlived_by_its_lease,
    a_key_the_provider_never_saw_fails_retryably_and_runs_once_on_retry,
    a_provider_that_cannot_answer_is_asked_again_later,
    permanent_refusals_are_replayed_and_idempotent_tools_are_retried,
);

impl TestSandbox {
    /// How many effects the provider committed under `provider_key` (the `Idempotency-Key`
    /// it was sent).
    pub async fn effects_of(&self, provider_key: &str) -> u64 {
        self.effects().await["by_key"][provider_key]
            .as_u64()
            .unwrap_or(0)
    }

    /// How many effects the provider committed for the operation: under its provider key.
    pub async fn effects_of_operation(&self, operation: &Value) -> u64 {
        let provider_key = operation["provider_key"].as_str();
        self.effects_of(provider_key.unwrap_or_else(|| panic!("no provider_key in {operation}")))
            .await
    }
}

impl Client {
    pub async fn invoke(&self, tool: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/tools/{tool}/invoke"), body)
            .await
    }
}

/// Registers `tool` as a tool of `effect` run by the sandbox, with a short lease.
pub async fn register_sandbox_tool(
    app: &TestApp,
    provider: &TestSandbox,
    tool: &str,
    effect: &str,
    timeout_ms: u32,
) {
    let admin = app.person(app::domain::Role::Admin).await;
    // The provider dedupes, but idem is not told: for a non-idempotent tool it must then
    // never re-send after an ambiguous outcome (at most once), whatever the provider does.
    let mut executor = serde_json::to_value(provider.executor(tool, timeout_ms)).unwrap();
    executor["provider_dedupes"] = json!(false);
    let policy = json!({ "effect": effect, "lease_seconds": 1, "executor": executor });
    assert_eq!(admin.put_tool(tool, &policy).await.status(), 200);
}

/// A sandbox provider, a server with `tool` registered as a non-idempotent tool run by it,
/// and an agent of `namespace`.
pub async fn sandbox_rig(
    db: Db,
    tool: &str,
    timeout_ms: u32,
    namespace: &str,
) -> (TestSandbox, TestApp, Client) {
    let provider = TestSandbox::spawn().await;
    let app = TestApp::spawn(db).await;
    register_sandbox_tool(&app, &provider, tool, "non_idempotent_write", timeout_ms).await;
    let agent = app.agent(namespace).await;
    (provider, app, agent)
}

/// Polls the operation until its status is `status` (or fails after 20 s).
pub async fn wait_for_status(agent: &Client, id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let body: Value = agent.operation(id).await.json().await.unwrap();
        if body["operation"]["status"] == status {
            return body["operation"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body: Value = agent.operation(id).await.json().await.unwrap();
    panic!("the operation never became {status}: {body}");
}

fn charge(n: u32) -> Value {
    json!({ "key": format!("charge:{n}"), "args": { "order_id": n, "amount_cents": 500 } })
}

async fn a_provider_that_commits_then_times_out_is_reconciled_to_one_success(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "charge", 300, "shop").await;
    provider
        .fault(json!({ "fault": "delay_after_commit", "delay_ms": 1500 }))
        .await;

    let response = agent.invoke("charge", &charge(1)).await;
    assert_eq!(response.status(), 201);
    let invoked: Value = response.json().await.unwrap();
    assert_eq!(invoked["operation"]["status"], "unknown", "{invoked}");
    assert_eq!(invoked["operation"]["error"]["code"], "timeout");
    let id = invoked["operation"]["id"].as_str().unwrap().to_owned();

    let settled = wait_for_status(&agent, &id, "succeeded").await;
    assert_eq!(settled["provider_ref"], "eff_1");
    assert_eq!(provider.effects_of_operation(&settled).await, 1);

    let replay = agent.invoke("charge", &charge(1)).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(
        provider.effects_of_operation(&settled).await,
        1,
        "a replay calls nobody"
    );

    let (kinds, events) = agent.event_kinds(&id).await;
    assert_in_order(
        &kinds,
        &["claimed", "marked_unknown", "reconciled", "replayed"],
    );
    let reconciled = events.iter().find(|e| e["kind"] == "reconciled").unwrap();
    assert_eq!(reconciled["actor"], "system:reconciler");
    assert_eq!(reconciled["detail"]["found"], true);
    assert!(reconciled["detail"]["unknown_for_ms"].as_i64().unwrap() >= 300);
}

async fn the_same_message_delivered_twice_takes_effect_once(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "email", 2000, "support").await;
    let message = json!({ "key": "welcome:ada", "args": { "to": "ada@example.com" } });

    let first = agent.invoke("email", &message).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["operation"]["status"], "succeeded");
    let second = agent.invoke("email", &message).await;
    assert_eq!(second.status(), 200);
    let second: Value = second.json().await.unwrap();
    assert_eq!(second["replayed"], true);
    assert_eq!(second["operation"]["result"], first["operation"]["result"]);
    assert_eq!(provider.effects_of_operation(&first["operation"]).await, 1);
}

async fn the_same_message_delivered_concurrently_takes_effect_once(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "email", 3000, "support").await;
    provider
        .fault(json!({ "fault": "delay_before_commit", "delay_ms": 500 }))
        .await;
    let message = json!({ "key": "welcome:bob", "args": { "to": "bob@example.com" } });

    let mut deliveries = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (agent, message) = (agent.clone(), message.clone());
        deliveries.spawn(async move { agent.invoke("email", &message).await.status().as_u16() });
    }
    let statuses = deliveries.join_all().await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| [201, 200, 409].contains(s)),
        "{statuses:?}"
    );
    let replay: Value = agent.invoke("email", &message).await.json().await.unwrap();
    assert_eq!(provider.effects_of_operation(&replay["operation"]).await, 1);
}

/// Asserts that `expected` occur in `kinds` in this order (other events may come between).
pub fn assert_in_order(kinds: &[String], expected: &[&str]) {
    let mut rest = kinds.iter();
    for want in expected {
        assert!(
            rest.any(|kind| kind == want),
            "expected {expected:?} in order within {kinds:?}"
        );
    }
}

async fn a_lease_that_runs_out_during_a_slow_call_never_runs_it_twice(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "transfer", 3000, "treasury").await;
    let transfer = json!({ "tool": "transfer", "key": "transfer:7", "args": { "amount": 100 } });
    let (id, token, started) = agent.start(&transfer).await;
    let provider_key = started["operation"]["provider_key"]
        .as_str()
        .unwrap()
        .to_owned();

    // The agent calls the provider itself, slowly: the 1 s lease runs out meanwhile.
    provider
        .fault(json!({ "fault": "delay_before_commit", "delay_ms": 2000 }))
        .await;
    let provider = std::sync::Arc::new(provider);
    let slow_call = {
        let provider = provider.clone();
        tokio::spawn(async move {
            let response = provider
                .act("transfer", Some(&provider_key), &json!({ "amount": 100 }))
                .await;
            response.json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(1400)).await;
    assert_error(
        agent.claim(&transfer).await,
        409,
        "operation_outcome_unknown",
    )
    .await;
    let answer = slow_call.await.unwrap();
    let late = json!({ "lease_token": token, "outcome": "succeeded", "result": answer });
    assert_error(agent.complete(&id, &late).await, 409, "lease_lost").await;

    // The reconciler waits out the executor's timeout, then finds the effect.
    let settled = wait_for_status(&agent, &id, "succeeded").await;
    assert_eq!(settled["provider_ref"], answer["provider_ref"]);
    assert_eq!(provider.effects_of_operation(&settled).await, 1);
    let (kinds, _) = agent.event_kinds(&id).await;
    assert_in_order(
        &kinds,
        &["claimed", "lease_expired", "blocked_unknown", "reconciled"],
    );
}

async fn a_call_idem_runs_is_never_outlived_by_its_lease(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "transfer", 3000, "treasury").await;
    provider
        .fault(json!({ "fault": "delay_before_commit", "delay_ms": 2000 }))
        .await;
    let transfer = json!({ "key": "transfer:8", "args": { "amount": 100 } });
    let first = {
        let (agent, transfer) = (agent.clone(), transfer.clone());
        tokio::spawn(async move { agent.invoke("transfer", &transfer).await.status() })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let duplicate = agent.invoke("transfer", &transfer).await;
    assert_error(duplicate, 409, "operation_in_progress").await;
    assert_eq!(first.await.unwrap(), 201);
    let replay: Value = agent
        .invoke("transfer", &transfer)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(provider.effects_of_operation(&replay["operation"]).await, 1);
}

async fn a_key_the_provider_never_saw_fails_retryably_and_runs_once_on_retry(db: Db) {
    let (provider, _app, agent) = sandbox_rig(db, "charge", 300, "shop").await;
    provider
        .fault(json!({ "fault": "drop_before_commit" }))
        .await;

    let invoked: Value = agent
        .invoke("charge", &charge(2))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(invoked["operation"]["status"], "unknown", "{invoked}");
    let id = invoked["operation"]["id"].as_str().unwrap().to_owned();
    let failed = wait_for_status(&agent, &id, "failed").await;
    assert_eq!(failed["retryable"], true);
    assert_eq!(provider.effects_of_operation(&failed).await, 0);

    let retry = agent.invoke("charge", &charge(2)).await;
    assert_eq!(retry.status(), 201);
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry["operation"]["status"], "succeeded");
    assert_eq!(retry["operation"]["attempt"], 2);
    assert_eq!(
        retry["operation"]["provider_key"], failed["provider_key"],
        "a new attempt of an operation reaches the provider under the same key"
    );
    assert_eq!(provider.effects_of_operation(&failed).await, 1);
}

async fn a_provider_that_cannot_answer_is_asked_again_later(db: Db) {
    let (provider, app, agent) = sandbox_rig(db, "charge", 300, "shop").await;
    let operator = app.person(app::domain::Role::Operator).await;
    provider
        .fault(json!({ "fault": "drop_after_commit" }))
        .await;
    provider
        .fault(json!({ "fault": "lookup_error", "times": 1 }))
        .await;

    let invoked: Value = agent
        .invoke("charge", &charge(3))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(invoked["operation"]["status"], "unknown", "{invoked}");
    let id = invoked["operation"]["id"].as_str().unwrap().to_owned();
    // The first lookup fails (the background reconciler's or this one), the attempt is
    // recorded, and a later one settles it.
    let settled = wait_for_status(&agent, &id, "succeeded").await;
    assert_eq!(provider.effects_of_operation(&settled).await, 1);
    let (kinds, events) = agent.event_kinds(&id).await;
    let attempted = events.iter().find(|e| e["kind"] == "reconcile_attempted");
    let attempted = attempted.unwrap_or_else(|| panic!("{kinds:?}"));
    assert!(attempted["detail"]["next_attempt_at"].is_string());
    assert_eq!(settled["reconcile_attempts"], 1);
    assert_error(operator.reconcile(&id).await, 409, "operation_not_unknown").await;
}

async fn permanent_refusals_are_replayed_and_idempotent_tools_are_retried(db: Db) {
    let (provider, app, agent) = sandbox_rig(db, "charge", 2000, "shop").await;
    register_sandbox_tool(&app, &provider, "upsert", "idempotent_write", 2000).await;

    provider
        .fault(json!({ "fault": "fail_before_commit", "status": 402 }))
        .await;
    let refused: Value = agent
        .invoke("charge", &charge(4))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(refused["operation"]["status"], "failed");
    assert_eq!(refused["operation"]["retryable"], false);
    let replay = agent.invoke("charge", &charge(4)).await;
    assert_eq!(replay.status(), 200, "a permanent failure is replayed");
    assert_eq!(
        provider.effects_of_operation(&refused["operation"]).await,
        0
    );

    // An idempotent write is retried by idem itself when the provider answers 503.
    provider
        .fault(json!({ "fault": "fail_before_commit", "status": 503 }))
        .await;
    let upsert = json!({ "key": "profile:1", "args": { "name": "Ada" } });
    let response = agent.invoke("upsert", &upsert).await;
    assert_eq!(response.status(), 201);
    let upserted: Value = response.json().await.unwrap();
    assert_eq!(upserted["operation"]["status"], "succeeded", "{upserted}");
    assert_eq!(
        provider.effects_of_operation(&upserted["operation"]).await,
        1
    );
}
