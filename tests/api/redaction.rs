//! What a tool answered is stored redacted by the rules its arguments were: a provider that
//! echoes a customer's e-mail must not put it back into the ledger the arguments kept it out of.

use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{Db, TestApp};
use crate::on_both_databases;
use crate::sandbox_helpers::TestSandbox;

on_both_databases!(
    an_executors_echo_of_a_redacted_argument_is_stored_redacted,
    an_agents_reported_result_is_stored_redacted,
);

async fn an_executors_echo_of_a_redacted_argument_is_stored_redacted(db: Db) {
    let provider = TestSandbox::spawn().await;
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let executor = serde_json::to_value(provider.executor("refund", 5000)).unwrap();
    let policy = json!({ "redact_fields": ["customer.email"], "executor": executor });
    assert_eq!(admin.put_tool("refund", &policy).await.status(), 200);
    let agent = app.agent("shop").await;

    let refund = json!({ "key": "refund:1", "args": {
        "amount_cents": 500, "customer": { "email": "ann@example.com" } } });
    let invoked: Value = agent
        .post_json("/v1/tools/refund/invoke", &refund)
        .await
        .json()
        .await
        .unwrap();
    let operation = &invoked["operation"];
    assert_eq!(operation["status"], "succeeded", "{invoked}");
    assert_eq!(operation["args"]["customer"]["email"], "[redacted]");
    let echoed = &operation["result"]["args"];
    assert_eq!(echoed["customer"]["email"], "[redacted]", "{operation}");
    assert_eq!(echoed["amount_cents"], 500, "the rest of the answer stays");

    let id = operation["id"].as_str().unwrap();
    let stored = agent
        .get(&format!("/v1/operations/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(!stored.contains("ann@example.com"), "{stored}");
}

async fn an_agents_reported_result_is_stored_redacted(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "redact_fields": ["customer.email"] });
    assert_eq!(admin.put_tool("refund", &policy).await.status(), 200);
    let agent = app.agent("shop").await;
    let claim = json!({ "tool": "refund", "key": "refund:2",
                        "args": { "customer": { "email": "bob@example.com" } } });
    let (id, token, _) = agent.start(&claim).await;

    let result = json!({ "refund_id": "re_2", "customer": { "email": "bob@example.com" },
                         "session_token": "s3cr3t", "card": "4111111111111111" });
    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": result });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    let read: Value = agent.operation(&id).await.json().await.unwrap();
    assert_eq!(
        read["operation"]["result"],
        json!({ "refund_id": "re_2", "customer": { "email": "[redacted]" },
                "session_token": "[redacted]", "card": "[redacted]" })
    );
    assert_eq!(
        agent.complete(&id, &done).await.status(),
        200,
        "the same completion again is still a repeat"
    );
}
