//! The sandbox provider over real HTTP: idempotency keys, lookups, effect counts, its
//! configuration and its command. Its faults are in `sandbox_faults.rs`.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::sandbox_helpers::{body, header, TestSandbox};

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
    let client = reqwest::Client::new();
    let effect = client
        .post(format!("{address}/actions/email"))
        .json(&json!({"to": "a@b.c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(effect.status(), 200);

    // A call held by a ten-minute delay does not keep a stopping sandbox alive.
    let fault = json!({"fault": "delay_after_commit", "delay_ms": 600_000});
    let queued = client
        .post(format!("{address}/_faults"))
        .json(&fault)
        .send()
        .await
        .unwrap();
    assert_eq!(queued.status(), 201);
    let held = tokio::spawn(
        client
            .post(format!("{address}/actions/email"))
            .json(&json!({}))
            .send(),
    );
    let mut committed = false;
    for _ in 0..1000 {
        let effects: Value = client
            .get(format!("{address}/_effects"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        committed = effects["total"] == 2;
        if committed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(committed, "the held call reached the sandbox");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exit = None;
    for _ in 0..300 {
        exit = child.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(exit) = exit else {
        let _ = child.kill();
        panic!("the sandbox did not stop within 30 s of SIGTERM");
    };
    assert!(exit.success(), "{exit:?}");
    assert!(
        held.await.unwrap().is_err(),
        "the held call never got an answer"
    );
}
