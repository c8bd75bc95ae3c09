//! Alerts that reach people (`IDEM_ALERT_WEBHOOK_URL`): a condition that starts is POSTed
//! once as `firing`, once as `resolved` when it clears, to a real HTTP receiver.

use app::domain::{Role, ToolPolicy};
use chrono::TimeDelta;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

use crate::helpers::{Db, TestApp};
use crate::on_both_databases;
use crate::sandbox_helpers::TestSandbox;
use crate::webhook::{receiver, Inbox};
use idem::workers::{AlertWatch, Thresholds, Webhook};

on_both_databases!(
    an_approval_waiting_too_long_fires_once_and_resolves_once,
    stuck_unknowns_and_failing_reconciliation_fire_and_resolve,
);

/// The alert posts received so far: (idempotency key, body).
fn alerts(inbox: &Inbox, alert: &str) -> Vec<(String, Value)> {
    inbox
        .posts()
        .into_iter()
        .filter(|(_, body)| body["event"] == "alert" && body["alert"] == alert)
        .collect()
}

/// Waits until `count` alerts named `alert` have arrived.
async fn wait_for(inbox: &Inbox, alert: &str, count: usize) -> Vec<(String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = alerts(inbox, alert);
        if got.len() >= count {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{count} × {alert}: {:?}",
            inbox.posts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn an_approval_waiting_too_long_fires_once_and_resolves_once(db: Db) {
    let (url, inbox) = receiver(0).await;
    let app = TestApp::spawn_with(db, |config| {
        config.alert_webhook_url = Some(url);
        config.alert_approval_wait_minutes = 0;
        config.public_url = Some("https://idem.example/".into());
    })
    .await;
    let admin = app.person(Role::Admin).await;
    let irreversible = json!({ "effect": "irreversible" });
    assert_eq!(admin.put_tool("wire", &irreversible).await.status(), 200);
    let agent = app.agent("treasury").await;
    let wire = json!({ "tool": "wire", "key": "w-1", "args": { "amount_cents": 5 } });
    let waiting: Value = agent.claim(&wire).await.json().await.unwrap();

    let fired = wait_for(&inbox, "approval_waiting", 1).await;
    let (key, body) = &fired[0];
    assert_eq!(body["state"], "firing");
    assert_eq!(body["value"], 1);
    assert_eq!(body["url"], "https://idem.example/approvals");
    assert!(key.starts_with("alert:approval_waiting:firing:"), "{key}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        alerts(&inbox, "approval_waiting").len(),
        1,
        "once per incident"
    );

    let id = waiting["operation"]["id"].as_str().unwrap();
    let approver = app.person(Role::Approver).await;
    let approved = approver
        .post_json(&format!("/v1/operations/{id}/approve"), &json!({}))
        .await;
    assert_eq!(approved.status(), 200);
    let both = wait_for(&inbox, "approval_waiting", 2).await;
    assert_eq!(both[1].1["state"], "resolved");
    assert_eq!(both[1].1["since"], both[0].1["since"], "the same incident");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(alerts(&inbox, "approval_waiting").len(), 2, "resolved once");
}

async fn stuck_unknowns_and_failing_reconciliation_fire_and_resolve(db: Db) {
    // The first delivery fails: it is tried again, with the same idempotency key.
    let (url, inbox) = receiver(1).await;
    let sandbox = TestSandbox::spawn().await;
    let app = TestApp::spawn(db).await;
    // The provider's lookups go nowhere: reconciliation keeps failing.
    let mut executor = sandbox.executor("payout", 1000);
    executor.reconcile_url = Some("http://127.0.0.1:9/lookup".into());
    let policy = ToolPolicy {
        executor: Some(executor),
        ..ToolPolicy::default_for_unregistered()
    };
    app.state.ledger.put_tool("payout", policy).await.unwrap();
    let agent = app.agent("treasury").await;
    let (id, token, _) = agent
        .start(&json!({ "tool": "payout", "key": "p-1", "args": { "cents": 9 } }))
        .await;
    let timed_out = json!({ "lease_token": token });
    let unknown = agent
        .post_json(&format!("/v1/operations/{id}/unknown"), &timed_out)
        .await;
    assert_eq!(unknown.status(), 200);
    wait_for_reconcile_attempts(&agent, &id).await;

    let webhook = Webhook::new(
        reqwest::Client::new(),
        url.parse().unwrap(),
        vec![Duration::from_millis(20)],
        "alert webhook",
    );
    let thresholds = Thresholds {
        stuck_after: TimeDelta::zero(),
        stuck_unknowns: 0,
        approval_wait: TimeDelta::minutes(60),
        reconcile_attempts: 1,
    };
    let watch = AlertWatch::new(
        app.state.ledger.clone(),
        webhook,
        thresholds,
        Duration::from_millis(50),
        None,
    );
    let mut retries = JoinSet::new();
    let sent = watch.run_once(&mut retries).await;
    let names: Vec<&str> = sent
        .iter()
        .map(|a| a["alert_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reconciliation_failing:payout", "stuck_unknowns"]);
    assert_eq!(sent[0]["tool"], "payout");
    while retries.join_next().await.is_some() {}
    assert!(watch.run_once(&mut retries).await.is_empty(), "nothing new");
    let posts = inbox.posts();
    assert_eq!(posts.len(), 3, "one retried after a 500: {posts:?}");
    let refused_key = &posts[0].0;
    let repeats = posts.iter().filter(|(key, _)| key == refused_key).count();
    assert_eq!(
        repeats, 2,
        "the retry repeats the refused delivery's key: {posts:?}"
    );

    let operator = app.person(Role::Operator).await;
    let settled = operator
        .post_json(
            &format!("/v1/operations/{id}/resolve"),
            &json!({ "outcome": "succeeded", "reason": "the bank confirmed it" }),
        )
        .await;
    assert_eq!(settled.status(), 200);
    let resolved = watch.run_once(&mut retries).await;
    assert!(resolved.iter().all(|alert| alert["state"] == "resolved"));
    assert_eq!(resolved.len(), 2, "{resolved:?}");
}

/// Waits until the background reconciler has tried (and failed) to look the operation up.
async fn wait_for_reconcile_attempts(agent: &crate::helpers::Client, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let read: Value = agent.operation(id).await.json().await.unwrap();
        if read["operation"]["reconcile_attempts"]
            .as_u64()
            .unwrap_or(0)
            >= 1
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no reconciliation attempt: {read}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Prometheus alert examples in docs/operating.md use only metrics `/metrics` serves.
#[tokio::test]
async fn the_documented_alert_rules_use_metrics_idem_serves() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let text = app.anonymous().get("/metrics").await.text().await.unwrap();
    let served: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operating.md")).unwrap();
    let rules = docs
        .split("### Alert examples")
        .nth(1)
        .and_then(|rest| rest.split("```").nth(1))
        .expect("the alert examples' YAML block");
    let mut used = Vec::new();
    for expr in rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("expr:"))
    {
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("idem_") {
                let name = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|suffix| word.strip_suffix(suffix))
                    .unwrap_or(word);
                used.push(name.to_owned());
            }
        }
    }
    assert!(used.len() >= 5, "the rules name idem's metrics: {used:?}");
    for name in &used {
        assert!(
            served.contains(&name.as_str()),
            "{name} is not served: {served:?}"
        );
    }
}
