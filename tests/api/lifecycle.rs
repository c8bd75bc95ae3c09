//! Lists, tools, and time: lease expiry, TTL expiry. Leases and TTLs here are one second
//! long, the shortest a tool may have, so the waits stay short.

use app::domain::Role;
use serde_json::{json, Value};
use std::time::Duration;

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    lists_are_newest_first_filtered_paginated_and_per_namespace,
    bad_list_parameters_are_400,
    admins_register_tools_and_everyone_reads_the_guarantee,
    an_expired_lease_makes_a_non_idempotent_operation_unknown,
    an_expired_lease_of_an_idempotent_tool_is_taken_over,
    after_the_ttl_the_key_starts_a_new_operation_and_the_old_one_stays_readable,
    an_unknown_operation_never_expires_by_ttl,
    the_lease_reaper_makes_a_lapsed_operation_unknown_without_any_claim,
    only_admins_see_an_executors_whole_urls,
);

impl Client {
    pub async fn list(&self, query: &str) -> reqwest::Response {
        self.get(&format!("/v1/operations{query}")).await
    }
}

fn ids(page: &Value) -> Vec<String> {
    page["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn lists_are_newest_first_filtered_paginated_and_per_namespace(db: Db) {
    let app = TestApp::spawn(db).await;
    let billing = app.agent("billing").await;
    let support = app.agent("support").await;
    let mut created = Vec::new();
    for n in 0..5 {
        let tool = if n % 2 == 0 { "refund" } else { "send_email" };
        let body = json!({ "tool": tool, "key": format!("k{n}"), "args": { "n": n }, "run_id": "run-1", "step": n });
        created.push(billing.start(&body).await.0);
    }
    support
        .start(&json!({ "tool": "refund", "key": "k0", "args": {} }))
        .await;
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();

    let all: Value = billing.list("").await.json().await.unwrap();
    assert_eq!(ids(&all), newest_first);
    assert!(all["next_cursor"].is_null());

    let mut paged = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let page: Value = billing.list(&query).await.json().await.unwrap();
        paged.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(
        paged, newest_first,
        "pages cover every operation once, in order"
    );

    let refunds: Value = billing.list("?tool=refund").await.json().await.unwrap();
    assert_eq!(ids(&refunds).len(), 3);
    let pending: Value = billing
        .list("?status=pending&run_id=run-1")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(ids(&pending).len(), 5);
    let none: Value = billing
        .list("?status=succeeded")
        .await
        .json()
        .await
        .unwrap();
    assert!(ids(&none).is_empty());

    let foreign: Value = billing
        .list("?namespace=support")
        .await
        .json()
        .await
        .unwrap();
    assert!(ids(&foreign).is_empty(), "another namespace lists as empty");
    let viewer = app.person(Role::Viewer).await;
    let everyone: Value = viewer.list("").await.json().await.unwrap();
    assert_eq!(ids(&everyone).len(), 6);
    let just_support: Value = viewer
        .list("?namespace=support")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(ids(&just_support).len(), 1);
}

async fn bad_list_parameters_are_400(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("billing").await;
    for (query, code) in [
        ("?limit=0", "invalid_limit"),
        ("?limit=201", "invalid_limit"),
        ("?limit=ten", "invalid_limit"),
        ("?cursor=nonsense", "invalid_cursor"),
        ("?status=done", "invalid_status"),
        ("?tool=bad%20tool", "invalid_tool_name"),
    ] {
        assert_error(agent.list(query).await, 400, code).await;
    }
    // The query as API.md spells it, every value left empty, is no filter at all.
    let (id, _, _) = agent
        .start(&json!({ "tool": "refund", "key": "k1", "args": {} }))
        .await;
    let empty = agent
        .list("?status=&tool=&run_id=&namespace=&limit=&cursor=")
        .await;
    assert_eq!(empty.status(), 200);
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(ids(&empty), [id]);
}

async fn admins_register_tools_and_everyone_reads_the_guarantee(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let agent = app.agent("billing").await;

    let unregistered: Value = agent.get("/v1/tools/refund").await.json().await.unwrap();
    assert_eq!(unregistered["tool"]["registered"], false);
    assert_eq!(unregistered["tool"]["effect"], "non_idempotent_write");
    assert_eq!(unregistered["tool"]["guarantee"], "at_most_once");
    assert_eq!(unregistered["tool"]["ttl_seconds"], 86400);
    // API.md shows a tool's fields at the top level: they are there too, the same.
    assert_eq!(unregistered["guarantee"], "at_most_once");
    assert_eq!(unregistered["effect"], "non_idempotent_write");
    assert_eq!(unregistered["name"], "refund");
    for (field, value) in unregistered["tool"].as_object().unwrap() {
        assert_eq!(&unregistered[field], value, "top-level {field}");
    }

    let policy =
        json!({ "effect": "idempotent_write", "lease_seconds": 10, "key_fields": ["order_id"] });
    let registered = admin.put_tool("refund", &policy).await;
    assert_eq!(registered.status(), 200);
    let registered: Value = registered.json().await.unwrap();
    assert_eq!(registered["tool"]["guarantee"], "exactly_once");
    assert_eq!(registered["tool"]["lease_seconds"], 10);
    assert_eq!(registered["guarantee"], "exactly_once");
    assert_eq!(registered["lease_seconds"], 10);

    let listed: Value = agent.get("/v1/tools").await.json().await.unwrap();
    assert_eq!(listed["tools"][0]["name"], "refund");
    assert_eq!(listed["tools"][0]["registered"], true);

    let keyed = agent
        .claim(&json!({ "tool": "refund", "args": { "order_id": "77", "amount": 1 } }))
        .await;
    let keyed: Value = keyed.json().await.unwrap();
    assert_eq!(keyed["operation"]["key_source"], "business");
    assert_eq!(keyed["operation"]["effect"], "idempotent_write");

    assert_error(
        app.person(Role::Operator)
            .await
            .put_tool("refund", &policy)
            .await,
        403,
        "forbidden",
    )
    .await;
    assert_error(agent.put_tool("refund", &policy).await, 403, "forbidden").await;
    assert_error(
        admin
            .put_tool("refund", &json!({ "lease_seconds": 0 }))
            .await,
        400,
        "invalid_tool_policy",
    )
    .await;
    assert_error(
        admin
            .put_tool("refund", &json!({ "effect": "sometimes" }))
            .await,
        400,
        "invalid_tool_policy",
    )
    .await;
    assert_error(
        admin.put_tool("bad%20name", &policy).await,
        400,
        "invalid_tool_name",
    )
    .await;
}

async fn short_lived_tool(app: &TestApp, name: &str, effect: &str) {
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": effect, "lease_seconds": 1, "ttl_seconds": 1 });
    assert_eq!(admin.put_tool(name, &policy).await.status(), 200);
}

async fn an_expired_lease_makes_a_non_idempotent_operation_unknown(db: Db) {
    let app = TestApp::spawn(db).await;
    short_lived_tool(&app, "charge", "non_idempotent_write").await;
    let agent = app.agent("billing").await;
    let body = json!({ "tool": "charge", "key": "c1", "args": { "cents": 100 } });
    let (id, token, _) = agent.start(&body).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let blocked = assert_error(agent.claim(&body).await, 409, "operation_outcome_unknown").await;
    assert_eq!(
        blocked["error"]["details"]["operation"]["status"],
        "unknown"
    );
    let late = json!({ "lease_token": token, "outcome": "succeeded" });
    assert_error(agent.complete(&id, &late).await, 409, "lease_lost").await;
    let events: Value = agent.events(&id).await.json().await.unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    // Whoever noticed first (the reaper or the claim) recorded the lapse, exactly once.
    assert_eq!(&kinds[..2], ["claimed", "lease_expired"]);
    assert_eq!(
        kinds.iter().filter(|k| **k == "lease_expired").count(),
        1,
        "{kinds:?}"
    );
}

async fn an_expired_lease_of_an_idempotent_tool_is_taken_over(db: Db) {
    let app = TestApp::spawn(db).await;
    short_lived_tool(&app, "lookup", "idempotent_write").await;
    let agent = app.agent("billing").await;
    let body = json!({ "tool": "lookup", "key": "l1", "args": {} });
    let (id, first_token, _) = agent.start(&body).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let (again_id, token, again) = agent.start(&body).await;
    assert_eq!(again_id, id);
    assert_eq!(again["operation"]["attempt"], 2);
    let stale = json!({ "lease_token": first_token, "outcome": "succeeded" });
    assert_error(agent.complete(&id, &stale).await, 409, "lease_lost").await;
    let done = json!({ "lease_token": token, "outcome": "succeeded" });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
}

async fn after_the_ttl_the_key_starts_a_new_operation_and_the_old_one_stays_readable(db: Db) {
    let app = TestApp::spawn(db).await;
    short_lived_tool(&app, "charge", "non_idempotent_write").await;
    let agent = app.agent("billing").await;
    let body = json!({ "tool": "charge", "key": "c1", "args": { "cents": 100 } });
    let (old_id, token, _) = agent.start(&body).await;
    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": { "n": 1 } });
    assert_eq!(agent.complete(&old_id, &done).await.status(), 200);
    assert_eq!(
        agent.claim(&body).await.status(),
        200,
        "replayed within the TTL"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;

    let mut other_args = body.clone();
    other_args["args"]["cents"] = json!(999);
    let (new_id, _, fresh) = agent.start(&other_args).await;
    assert_ne!(new_id, old_id);
    assert_eq!(fresh["operation"]["attempt"], 1);
    let old: Value = agent.operation(&old_id).await.json().await.unwrap();
    assert_eq!(
        old["operation"]["result"],
        json!({ "n": 1 }),
        "history stays readable"
    );
    let events: Value = agent.events(&old_id).await.json().await.unwrap();
    assert_eq!(
        events["events"].as_array().unwrap().last().unwrap()["kind"],
        "retired"
    );
}

async fn an_unknown_operation_never_expires_by_ttl(db: Db) {
    let app = TestApp::spawn(db).await;
    short_lived_tool(&app, "charge", "non_idempotent_write").await;
    let agent = app.agent("billing").await;
    let body = json!({ "tool": "charge", "key": "c1", "args": {} });
    let (id, token, _) = agent.start(&body).await;
    assert_eq!(
        agent
            .mark_unknown(&id, &json!({ "lease_token": token }))
            .await
            .status(),
        200
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_error(agent.claim(&body).await, 409, "operation_outcome_unknown").await;
}

async fn the_lease_reaper_makes_a_lapsed_operation_unknown_without_any_claim(db: Db) {
    let app = TestApp::spawn(db).await;
    short_lived_tool(&app, "charge", "non_idempotent_write").await;
    short_lived_tool(&app, "lookup", "idempotent_write").await;
    let agent = app.agent("billing").await;
    let (charge, _, _) = agent
        .start(&json!({ "tool": "charge", "key": "c1", "args": {} }))
        .await;
    let (lookup, _, _) = agent
        .start(&json!({ "tool": "lookup", "key": "l1", "args": {} }))
        .await;

    // The lease lasts one second and the reaper looks every 200 ms; give it ample time.
    let mut status = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let read: Value = agent.operation(&charge).await.json().await.unwrap();
        status = read["operation"]["status"].clone();
        if status == "unknown" {
            break;
        }
    }
    assert_eq!(
        status, "unknown",
        "nobody claimed it, yet its lapse is visible"
    );
    let events: Value = agent.events(&charge).await.json().await.unwrap();
    let last = events["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["kind"].as_str(), last["actor"].as_str()),
        (Some("lease_expired"), Some("system"))
    );

    let idempotent: Value = agent.operation(&lookup).await.json().await.unwrap();
    assert_eq!(
        idempotent["operation"]["status"], "pending",
        "an idempotent call waits to be taken over"
    );
}

async fn only_admins_see_an_executors_whole_urls(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let executor = json!({ "url": "https://pay.internal/refund?token=s3cr3t",
                           "reconcile_url": "https://svc:pw@pay.internal/lookup" });
    let policy = json!({ "executor": executor });
    assert_eq!(admin.put_tool("refund", &policy).await.status(), 200);

    let whole: Value = admin.get("/v1/tools/refund").await.json().await.unwrap();
    assert_eq!(whole["executor"]["url"], executor["url"]);
    assert_eq!(
        whole["executor"]["reconcile_url"],
        executor["reconcile_url"]
    );

    let agent = app.agent("billing").await;
    let operator = app.person(Role::Operator).await;
    for caller in [&agent, &operator] {
        for path in ["/v1/tools/refund", "/v1/tools"] {
            let answer = caller.get(path).await.text().await.unwrap();
            assert!(
                !answer.contains("s3cr3t") && !answer.contains("svc:pw"),
                "{answer}"
            );
            assert!(answer.contains("https://pay.internal"), "{path}: {answer}");
        }
    }
    let read: Value = agent.get("/v1/tools/refund").await.json().await.unwrap();
    assert_eq!(read["executor"]["url"], "https://pay.internal");
    assert_eq!(
        read["tool"]["executor"]["reconcile_url"],
        "https://pay.internal"
    );
}
