//! The sandbox provider's injected faults over real HTTP: each does what it says to the
//! call it hits, and only to that call.

use serde_json::json;
use std::time::Duration;

use crate::sandbox_helpers::{body, header, TestSandbox};

#[tokio::test]
async fn fail_before_commit_answers_the_status_and_commits_nothing() {
    let sandbox = TestSandbox::spawn().await;
    sandbox.fault(json!({"fault": "fail_before_commit"})).await;
    sandbox
        .fault(json!({"fault": "fail_before_commit", "status": 429, "key": "k2", "times": 2}))
        .await;

    let failed = sandbox.act("refund", Some("k1"), &json!({})).await;
    assert_eq!(failed.status(), 503);
    assert!(body(failed).await["error"]
        .as_str()
        .unwrap()
        .contains("fail_before_commit"));
    for _ in 0..2 {
        let limited = sandbox.act("refund", Some("k2"), &json!({})).await;
        assert_eq!(limited.status(), 429);
    }
    assert_eq!(sandbox.total().await, 0);

    // Consumed: the same calls now go through.
    for key in ["k1", "k2"] {
        assert_eq!(
            sandbox.act("refund", Some(key), &json!({})).await.status(),
            200
        );
    }
    assert_eq!(sandbox.total().await, 2);
}

#[tokio::test]
async fn a_fault_for_one_key_leaves_other_calls_alone() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "fail_before_commit", "key": "k1"}))
        .await;
    assert_eq!(
        sandbox.act("refund", Some("k2"), &json!({})).await.status(),
        200
    );
    assert_eq!(sandbox.act("refund", None, &json!({})).await.status(), 200);
    assert_eq!(sandbox.lookup("refund", "k1").await.status(), 200);
    assert_eq!(
        sandbox.act("refund", Some("k1"), &json!({})).await.status(),
        503
    );
}

#[tokio::test]
async fn delay_after_commit_commits_before_the_caller_gives_up() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "delay_after_commit", "delay_ms": 60_000}))
        .await;
    let timed_out = sandbox
        .try_act(
            "refund",
            Some("k1"),
            &json!({}),
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert!(timed_out.is_timeout(), "{timed_out:?}");
    assert!(sandbox.wait_for_total(1).await, "the effect was committed");
    let found = body(sandbox.lookup("refund", "k1").await).await;
    assert_eq!(found["found"], true);
    // A retry with the key is answered at once from the stored answer.
    let retry = sandbox.act("refund", Some("k1"), &json!({})).await;
    assert_eq!(header(&retry, "idempotent-replayed"), Some("true"));
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn delay_before_commit_holds_the_key_in_progress_then_commits() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "delay_before_commit", "delay_ms": 60_000, "key": "slow"}))
        .await;
    let slow = {
        let sandbox_address = sandbox.address.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{sandbox_address}/actions/refund"))
                .header("Idempotency-Key", "slow")
                .json(&json!({}))
                .send()
                .await
        })
    };
    assert!(sandbox.wait_for_faults_consumed().await);
    assert_eq!(
        sandbox.total().await,
        0,
        "nothing is committed during the delay"
    );
    let duplicate = sandbox.act("refund", Some("slow"), &json!({})).await;
    assert_eq!(duplicate.status(), 409);
    assert_eq!(sandbox.lookup("refund", "slow").await.status(), 409);
    slow.abort();

    // A short delay: the caller that gives up early does not stop the commit.
    sandbox
        .fault(json!({"fault": "delay_before_commit", "delay_ms": 300}))
        .await;
    let gave_up = sandbox
        .try_act(
            "refund",
            Some("k2"),
            &json!({}),
            Some(Duration::from_millis(50)),
        )
        .await
        .unwrap_err();
    assert!(gave_up.is_timeout(), "{gave_up:?}");
    assert!(sandbox.wait_for_total(1).await);
    assert_eq!(sandbox.effects().await["by_key"], json!({"k2": 1}));
}

#[tokio::test]
async fn drop_after_commit_closes_the_connection_without_an_answer() {
    let sandbox = TestSandbox::spawn().await;
    sandbox.fault(json!({"fault": "drop_after_commit"})).await;
    let dropped = sandbox
        .try_act("refund", Some("k1"), &json!({"a": 1}), None)
        .await
        .unwrap_err();
    assert!(
        dropped.is_request() && !dropped.is_connect() && dropped.status().is_none(),
        "{dropped:?}"
    );
    assert_eq!(sandbox.total().await, 1);
    let retry = sandbox.act("refund", Some("k1"), &json!({"a": 1})).await;
    assert_eq!(header(&retry, "idempotent-replayed"), Some("true"));
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn drop_before_commit_closes_the_connection_and_commits_nothing() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "drop_before_commit", "times": 2}))
        .await;
    for _ in 0..2 {
        let dropped = sandbox
            .try_act("refund", Some("k1"), &json!({}), None)
            .await
            .unwrap_err();
        assert!(
            dropped.is_request() && dropped.status().is_none(),
            "{dropped:?}"
        );
    }
    assert_eq!(sandbox.total().await, 0);
    assert_eq!(
        body(sandbox.lookup("refund", "k1").await).await["found"],
        false
    );
    let retry = sandbox.act("refund", Some("k1"), &json!({})).await;
    assert_eq!(header(&retry, "idempotent-replayed"), None);
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn lookup_faults_hit_lookups_only() {
    let sandbox = TestSandbox::spawn().await;
    sandbox.act("refund", Some("k1"), &json!({})).await;
    sandbox.fault(json!({"fault": "lookup_error"})).await;
    sandbox
        .fault(json!({"fault": "lookup_error", "status": 500, "key": "k9"}))
        .await;
    assert_eq!(
        sandbox.act("refund", Some("k2"), &json!({})).await.status(),
        200
    );
    assert_eq!(sandbox.lookup("refund", "k1").await.status(), 503);
    assert_eq!(sandbox.lookup("refund", "k1").await.status(), 200);
    assert_eq!(sandbox.lookup("refund", "k9").await.status(), 500);

    sandbox
        .fault(json!({"fault": "lookup_delay", "delay_ms": 10}))
        .await;
    assert_eq!(
        body(sandbox.lookup("refund", "k1").await).await["found"],
        true
    );
    assert!(sandbox.wait_for_faults_consumed().await);
}

#[tokio::test]
async fn bad_control_requests_are_refused_with_a_reason() {
    let sandbox = TestSandbox::spawn().await;
    let cases = [
        ("/_faults", json!({"fault": "explode"}), "unknown fault"),
        (
            "/_faults",
            json!({"fault": "delay_after_commit"}),
            "delay_ms",
        ),
        (
            "/_faults",
            json!({"fault": "drop_after_commit", "time": 2}),
            "unknown field",
        ),
        ("/_config", json!({"ignore": true}), "unknown field"),
    ];
    for (path, request, reason) in cases {
        let response = sandbox.post(path, &request).await;
        assert_eq!(response.status(), 400, "{request}");
        let error = body(response).await["error"].as_str().unwrap().to_owned();
        assert!(error.contains(reason), "{request}: {error}");
    }
    assert_eq!(sandbox.get_json("/_faults").await, json!({"faults": []}));
    assert_eq!(sandbox.get_json("/healthz").await, json!({"status": "ok"}));
}
