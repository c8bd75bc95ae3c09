//! The sandbox provider over real HTTP: idempotency keys, lookups, effect counts, and every
//! fault it injects.

use reqwest::Response;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::sandbox_helpers::TestSandbox;

async fn body(response: Response) -> Value {
    response.json().await.unwrap()
}

fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}

#[tokio::test]
async fn a_key_commits_one_effect_and_replays_its_answer() {
    let sandbox = TestSandbox::spawn().await;
    let args = json!({"order_id": "1234", "amount_cents": 500});
    let first = sandbox.act("refund", Some("k1"), &args).await;
    assert_eq!(first.status(), 200);
    assert_eq!(header(&first, "x-provider-ref"), Some("eff_1"));
    assert_eq!(header(&first, "idempotent-replayed"), None);
    let answer = body(first).await;
    assert_eq!(
        answer,
        json!({"id": "eff_1", "provider_ref": "eff_1", "name": "refund", "args": args})
    );

    let again = sandbox.act("refund", Some("k1"), &args).await;
    assert_eq!(again.status(), 200);
    assert_eq!(header(&again, "idempotent-replayed"), Some("true"));
    assert_eq!(body(again).await, answer);

    let effects = sandbox.effects().await;
    assert_eq!(effects["total"], 1);
    assert_eq!(effects["by_key"], json!({"k1": 1}));
    let effect = &effects["effects"][0];
    assert_eq!(
        (
            &effect["id"],
            &effect["key"],
            &effect["name"],
            &effect["args"]
        ),
        (&json!("eff_1"), &json!("k1"), &json!("refund"), &args)
    );
    assert!(effect["at"].as_str().unwrap().contains('T'), "{effect}");
}

#[tokio::test]
async fn reusing_a_key_with_other_arguments_is_refused_and_commits_nothing() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .act("refund", Some("k1"), &json!({"amount": 5}))
        .await;
    for (name, args) in [
        ("refund", json!({"amount": 6})),
        ("email", json!({"amount": 5})),
    ] {
        let reused = sandbox.act(name, Some("k1"), &args).await;
        assert_eq!(reused.status(), 422);
        assert_eq!(
            body(reused).await,
            json!({"error": "idempotency key reused with different parameters"})
        );
    }
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn calls_without_a_key_commit_every_time() {
    let sandbox = TestSandbox::spawn().await;
    for id in ["eff_1", "eff_2"] {
        let answer = body(sandbox.act("email", None, &json!({"to": "a@b.c"})).await).await;
        assert_eq!(answer["id"], id);
    }
    let effects = sandbox.effects().await;
    assert_eq!(
        (&effects["total"], &effects["by_key"]),
        (&json!(2), &json!({}))
    );
    assert_eq!(effects["effects"][1]["key"], Value::Null);
}

#[tokio::test]
async fn lookup_finds_what_a_key_committed_and_nothing_else() {
    let sandbox = TestSandbox::spawn().await;
    let answer = body(sandbox.act("refund", Some("k 1&x"), &json!({"a": 1})).await).await;

    let found = sandbox.lookup("refund", "k 1&x").await;
    assert_eq!(found.status(), 200);
    assert_eq!(
        body(found).await,
        json!({"found": true, "result": answer, "provider_ref": "eff_1"})
    );
    for (name, key) in [("refund", "k2"), ("email", "k 1&x")] {
        let missing = sandbox.lookup(name, key).await;
        assert_eq!(body(missing).await, json!({"found": false}), "{name} {key}");
    }
    assert_eq!(sandbox.get("/actions/refund/lookup").await.status(), 400);
}

#[tokio::test]
async fn ignoring_keys_commits_every_call_until_reset() {
    let sandbox = TestSandbox::spawn().await;
    assert_eq!(
        body(sandbox.ignore_keys(true).await).await,
        json!({"ignore_idempotency_keys": true})
    );
    for id in ["eff_1", "eff_2", "eff_3"] {
        let response = sandbox.act("refund", Some("k1"), &json!({})).await;
        assert_eq!(header(&response, "idempotent-replayed"), None);
        assert_eq!(body(response).await["id"], id);
    }
    assert_eq!(sandbox.effects().await["by_key"], json!({"k1": 3}));

    sandbox.fault(json!({"fault": "drop_after_commit"})).await;
    assert_eq!(sandbox.reset().await.status(), 200);
    let effects = sandbox.effects().await;
    assert_eq!(
        (&effects["total"], &effects["by_key"]),
        (&json!(0), &json!({}))
    );
    assert_eq!(
        sandbox.get_json("/_config").await,
        json!({"ignore_idempotency_keys": false})
    );
    assert_eq!(sandbox.get_json("/_faults").await, json!({"faults": []}));
    // After the reset keys are honoured again, and ids keep counting up.
    for _ in 0..2 {
        let answer = body(sandbox.act("refund", Some("k1"), &json!({})).await).await;
        assert_eq!(answer["id"], "eff_4");
    }
}

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

#[tokio::test]
async fn the_sandbox_provider_command_prints_its_address_and_serves() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["sandbox-provider", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start idem sandbox-provider");
    // The line ends when the process does, so a sandbox that never prints fails here.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let Some(address) = first.trim().strip_prefix("sandbox provider listening on ") else {
        let _ = child.kill();
        panic!("unexpected first line {first:?}");
    };
    let health = reqwest::get(format!("{address}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let effect = reqwest::Client::new()
        .post(format!("{address}/actions/email"))
        .json(&json!({"to": "a@b.c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(effect.status(), 200);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}
