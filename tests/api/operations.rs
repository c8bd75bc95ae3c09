//! The claim table of API.md, row by row, on both databases.

use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    a_new_key_is_claimed_completed_and_then_replayed_with_a_note,
    a_duplicate_while_the_first_runs_gets_409_in_progress,
    the_same_key_with_other_args_is_422_with_both_fingerprints,
    key_order_whitespace_and_number_spelling_do_not_change_the_fingerprint,
    a_permanent_failure_is_replayed_and_a_retryable_one_gets_a_new_lease,
    an_unknown_outcome_blocks_every_retry,
    completions_are_idempotent_and_guarded_by_the_lease,
    keys_come_from_header_body_business_key_or_run_and_step,
    namespaces_never_collide_and_never_leak,
    invalid_claims_are_400_and_store_nothing,
    the_events_tell_what_happened,
    people_read_every_namespace_and_agents_only_their_own,
    many_concurrent_claims_of_one_key_start_exactly_one_operation,
    an_irreversible_tool_waits_for_approval_with_202,
    a_claim_over_the_body_limit_is_413_and_stores_nothing,
);

fn refund(order: &str) -> Value {
    json!({ "tool": "refund", "key": format!("refund:{order}"), "args": { "order_id": order, "amount_cents": 500 } })
}

impl Client {
    pub async fn claim(&self, body: &Value) -> reqwest::Response {
        self.post_json("/v1/operations", body).await
    }

    pub async fn claim_with_header(&self, key: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(self.url("/v1/operations"))
            .header("idempotency-key", key)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn complete(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/complete"), body)
            .await
    }

    pub async fn mark_unknown(&self, id: &str, body: &Value) -> reqwest::Response {
        self.post_json(&format!("/v1/operations/{id}/unknown"), body)
            .await
    }

    pub async fn operation(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/operations/{id}")).await
    }

    pub async fn events(&self, id: &str) -> reqwest::Response {
        self.get(&format!("/v1/operations/{id}/events")).await
    }

    /// Claims and expects 201; returns (operation id, lease token, body).
    pub async fn start(&self, body: &Value) -> (String, String, Value) {
        let response = self.claim(body).await;
        assert_eq!(response.status(), 201, "claim {body}");
        let started: Value = response.json().await.unwrap();
        let id = started["operation"]["id"].as_str().unwrap().to_owned();
        let token = started["lease"]["token"].as_str().unwrap().to_owned();
        (id, token, started)
    }
}

async fn a_new_key_is_claimed_completed_and_then_replayed_with_a_note(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let mut body = refund("1234");
    body["run_id"] = json!("run-42");
    body["step"] = json!(4);

    let (id, token, started) = agent.start(&body).await;
    let op = &started["operation"];
    assert_eq!(op["status"], "pending");
    assert_eq!(op["attempt"], 1);
    assert_eq!(op["key"], "refund:1234");
    assert_eq!(op["key_source"], "body");
    assert_eq!(op["namespace"], "support-bot");
    assert_eq!(op["effect"], "non_idempotent_write");
    assert_eq!(op["fingerprint"].as_str().unwrap().len(), 64);
    assert!(started["lease"]["expires_at"].is_string());

    let completion = json!({ "lease_token": token, "outcome": "succeeded", "result": { "refund_id": "re_1" }, "provider_ref": "re_1" });
    let completed = agent.complete(&id, &completion).await;
    assert_eq!(completed.status(), 200);
    let completed: Value = completed.json().await.unwrap();
    assert_eq!(completed["operation"]["status"], "succeeded");
    assert!(completed["operation"]["completed_at"].is_string());
    // "200 with the final Op": the Op's fields at the top level too, the same.
    for (field, value) in completed["operation"].as_object().unwrap() {
        assert_eq!(&completed[field], value, "top-level {field}");
    }

    let replay = agent.claim(&body).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["operation"]["id"], id.as_str());
    assert_eq!(
        replay["operation"]["result"],
        json!({ "refund_id": "re_1" })
    );
    assert_eq!(replay["operation"]["provider_ref"], "re_1");
    let note = replay["note"].as_str().unwrap();
    assert!(
        note.starts_with("already completed at step 4 at ")
            && note.ends_with("; no new action taken"),
        "{note}"
    );
}

async fn a_duplicate_while_the_first_runs_gets_409_in_progress(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let (id, _, _) = agent.start(&refund("1")).await;

    let duplicate = agent.claim(&refund("1")).await;
    let retry_after: u64 = duplicate.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body = assert_error(duplicate, 409, "operation_in_progress").await;
    assert_eq!(body["error"]["details"]["operation"]["id"], id.as_str());
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no new action taken"));
}

async fn the_same_key_with_other_args_is_422_with_both_fingerprints(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let (_, _, started) = agent.start(&refund("1")).await;
    let mut other = refund("1");
    other["args"]["amount_cents"] = json!(5000);

    let body = assert_error(agent.claim(&other).await, 422, "idempotency_key_reused").await;
    let details = &body["error"]["details"];
    assert_eq!(
        details["stored_fingerprint"],
        started["operation"]["fingerprint"]
    );
    assert_ne!(
        details["requested_fingerprint"],
        details["stored_fingerprint"]
    );
    assert_eq!(details["requested_fingerprint"].as_str().unwrap().len(), 64);
}

async fn key_order_whitespace_and_number_spelling_do_not_change_the_fingerprint(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let first = r#"{"tool":"refund","key":"k1","args":{"order_id":"\u0031","amount_cents":500.0,"meta":{"a":1,"b":[1,2]}}}"#;
    let second = r#"{ "key" : "k1", "args" : { "meta": {"b": [1, 2], "a": 1.0}, "amount_cents": 5e2, "order_id": "1" }, "tool": "refund" }"#;
    let started = agent
        .post_raw("/v1/operations", first, Some("application/json"))
        .await;
    assert_eq!(started.status(), 201);
    let again = agent
        .post_raw("/v1/operations", second, Some("application/json"))
        .await;
    assert_error(again, 409, "operation_in_progress").await;
}

async fn a_permanent_failure_is_replayed_and_a_retryable_one_gets_a_new_lease(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;

    let (id, token, _) = agent.start(&refund("permanent")).await;
    let failure = json!({ "lease_token": token, "outcome": "failed", "error": { "code": "card_declined", "message": "declined" } });
    assert_eq!(agent.complete(&id, &failure).await.status(), 200);
    let replay = agent.claim(&refund("permanent")).await;
    assert_eq!(replay.status(), 200);
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(replay["operation"]["status"], "failed");
    assert_eq!(replay["operation"]["error"]["code"], "card_declined");
    assert!(replay["note"].as_str().unwrap().contains("card_declined"));

    let (id, token, _) = agent.start(&refund("transient")).await;
    let failure = json!({ "lease_token": token, "outcome": "failed", "retryable": true, "error": { "code": "rate_limited", "message": "slow down" } });
    assert_eq!(agent.complete(&id, &failure).await.status(), 200);
    let (again_id, again_token, again) = agent.start(&refund("transient")).await;
    assert_eq!(again_id, id);
    assert_eq!(again["operation"]["attempt"], 2);
    assert_ne!(again_token, token);
    let old_token = json!({ "lease_token": token, "outcome": "succeeded" });
    assert_error(agent.complete(&id, &old_token).await, 409, "lease_lost").await;
}

async fn an_unknown_outcome_blocks_every_retry(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let (id, token, _) = agent.start(&refund("1")).await;
    let timeout = json!({ "lease_token": token, "error": { "code": "timeout", "message": "no answer in 5 s" } });
    let marked = agent.mark_unknown(&id, &timeout).await;
    assert_eq!(marked.status(), 200);
    assert_eq!(
        marked.json::<Value>().await.unwrap()["operation"]["status"],
        "unknown"
    );
    assert_eq!(
        agent.mark_unknown(&id, &timeout).await.status(),
        200,
        "a repeated report is answered again"
    );

    for _ in 0..2 {
        let body = assert_error(
            agent.claim(&refund("1")).await,
            409,
            "operation_outcome_unknown",
        )
        .await;
        assert_eq!(body["error"]["details"]["operation"]["status"], "unknown");
    }
    let late = json!({ "lease_token": token, "outcome": "succeeded" });
    assert_error(agent.complete(&id, &late).await, 409, "lease_lost").await;
}

async fn completions_are_idempotent_and_guarded_by_the_lease(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let (id, token, _) = agent.start(&refund("1")).await;

    let wrong = json!({ "lease_token": "not-the-token", "outcome": "succeeded" });
    assert_error(agent.complete(&id, &wrong).await, 409, "lease_lost").await;

    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": { "ok": true } });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    let again = agent.complete(&id, &done).await;
    assert_eq!(
        again.status(),
        200,
        "the same completion again is answered again"
    );
    assert_eq!(
        again.json::<Value>().await.unwrap()["operation"]["result"],
        json!({ "ok": true })
    );

    let different = json!({ "lease_token": token, "outcome": "failed", "error": { "code": "x", "message": "y" } });
    assert_error(
        agent.complete(&id, &different).await,
        409,
        "operation_already_final",
    )
    .await;
    assert_error(
        agent.complete(&id, &wrong).await,
        409,
        "operation_already_final",
    )
    .await;
    assert_error(
        agent
            .complete(&uuid::Uuid::new_v4().to_string(), &done)
            .await,
        404,
        "not_found",
    )
    .await;
    let bad_outcome = json!({ "lease_token": token, "outcome": "maybe" });
    assert_error(
        agent.complete(&id, &bad_outcome).await,
        400,
        "invalid_request",
    )
    .await;
}

async fn keys_come_from_header_body_business_key_or_run_and_step(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let args = json!({ "to": "ada@example.org", "subject": "hello" });

    let header = agent
        .claim_with_header("email-1", &json!({ "tool": "send_email", "args": args }))
        .await;
    let header: Value = header.json().await.unwrap();
    assert_eq!(
        (
            header["operation"]["key"].as_str(),
            header["operation"]["key_source"].as_str()
        ),
        (Some("email-1"), Some("header"))
    );

    let same = agent
        .claim_with_header(
            "email-2",
            &json!({ "tool": "send_email", "args": args, "key": "email-2" }),
        )
        .await;
    assert_eq!(
        same.status(),
        201,
        "a header and a body key that agree are fine"
    );
    let conflicting = agent
        .claim_with_header(
            "email-3",
            &json!({ "tool": "send_email", "args": args, "key": "other" }),
        )
        .await;
    assert_error(conflicting, 400, "conflicting_idempotency_keys").await;

    // The IETF draft's form, a quoted structured-field string, is the same key unquoted.
    let quoted = agent
        .claim_with_header(
            "\"email-2\"",
            &json!({ "tool": "send_email", "args": args, "key": "email-2" }),
        )
        .await;
    assert_eq!(quoted.status(), 409, "the same key, still running");
    let odd = agent
        .claim_with_header("\"email-4", &json!({ "tool": "send_email", "args": args }))
        .await;
    let odd: Value = odd.json().await.unwrap();
    assert_eq!(
        odd["operation"]["key"], "\"email-4",
        "not a string: the key as it is"
    );

    let business = json!({ "tool": "send_email", "args": args, "business_key": "welcome:ada" });
    let business: Value = agent.claim(&business).await.json().await.unwrap();
    assert_eq!(business["operation"]["key_source"], "business");
    assert_eq!(business["operation"]["key"], "welcome:ada");

    let derived = json!({ "tool": "send_email", "args": args, "run_id": "run-7", "step": 3 });
    let first: Value = agent.claim(&derived).await.json().await.unwrap();
    assert_eq!(first["operation"]["key_source"], "derived");
    assert!(
        first["operation"]["key"]
            .as_str()
            .unwrap()
            .starts_with("run:run-7:step:3:"),
        "{first}"
    );
    assert_error(agent.claim(&derived).await, 409, "operation_in_progress").await;

    let no_key = json!({ "tool": "send_email", "args": args, "run_id": "run-7" });
    assert_error(agent.claim(&no_key).await, 400, "missing_idempotency_key").await;
}

async fn namespaces_never_collide_and_never_leak(db: Db) {
    let app = TestApp::spawn(db).await;
    let billing = app.agent("billing").await;
    let support = app.agent("support").await;

    let (billing_id, billing_token, _) = billing.start(&refund("1")).await;
    let (support_id, _, _) = support.start(&refund("1")).await;
    assert_ne!(billing_id, support_id);

    assert_error(support.operation(&billing_id).await, 404, "not_found").await;
    assert_error(support.events(&billing_id).await, 404, "not_found").await;
    let steal = json!({ "lease_token": billing_token, "outcome": "succeeded" });
    assert_error(
        support.complete(&billing_id, &steal).await,
        404,
        "not_found",
    )
    .await;
    let absent = assert_error(
        support.operation(&uuid::Uuid::new_v4().to_string()).await,
        404,
        "not_found",
    )
    .await;
    let foreign = assert_error(support.operation(&billing_id).await, 404, "not_found").await;
    assert_eq!(
        absent, foreign,
        "another namespace's operation is indistinguishable from an absent one"
    );

    assert_eq!(billing.operation(&billing_id).await.status(), 200);
}

async fn invalid_claims_are_400_and_store_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let deep = (0..70).fold(json!(1), |inner, _| json!({ "a": inner }));
    let cases = [
        (
            json!({ "tool": "refund", "key": "k", "args": [1, 2] }),
            "invalid_args",
        ),
        (
            json!({ "tool": "refund", "key": "k", "args": "text" }),
            "invalid_args",
        ),
        (
            json!({ "tool": "bad tool!", "key": "k", "args": {} }),
            "invalid_tool_name",
        ),
        (
            json!({ "tool": "", "key": "k", "args": {} }),
            "invalid_tool_name",
        ),
        (
            json!({ "tool": "refund", "key": "tab\there", "args": {} }),
            "invalid_idempotency_key",
        ),
        (
            json!({ "tool": "refund", "key": "k".repeat(256), "args": {} }),
            "invalid_idempotency_key",
        ),
        (
            json!({ "tool": "refund", "key": "", "args": {} }),
            "invalid_idempotency_key",
        ),
        (
            json!({ "tool": "refund", "key": "k", "args": { "deep": deep } }),
            "json_too_deep",
        ),
        (json!({ "tool": "refund", "key": "k" }), "invalid_request"),
        (
            json!({ "tool": "refund", "key": "k", "args": {}, "step": -1 }),
            "invalid_request",
        ),
    ];
    for (body, code) in &cases {
        assert_error(agent.claim(body).await, 400, code).await;
    }
    let (_, _, started) = agent
        .start(&json!({ "tool": "refund", "key": "k", "args": {} }))
        .await;
    assert_eq!(
        started["operation"]["attempt"], 1,
        "nothing was stored by the refused claims"
    );
}

async fn the_events_tell_what_happened(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    let (id, token, _) = agent.start(&refund("1")).await;
    assert_error(
        agent.claim(&refund("1")).await,
        409,
        "operation_in_progress",
    )
    .await;
    let done = json!({ "lease_token": token, "outcome": "succeeded", "provider_ref": "re_9" });
    agent.complete(&id, &done).await;
    assert_eq!(agent.claim(&refund("1")).await.status(), 200);

    let events: Value = agent.events(&id).await.json().await.unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["claimed", "in_flight_rejected", "completed", "replayed"]
    );
    let completed = &events["events"][2];
    assert_eq!(completed["detail"]["provider_ref"], "re_9");
    assert!(completed["actor"]
        .as_str()
        .unwrap()
        .starts_with("agent:support-bot/"));
    assert!(completed["at"].is_string());
}

async fn people_read_every_namespace_and_agents_only_their_own(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("billing").await;
    let (id, _, _) = agent.start(&refund("1")).await;
    let viewer = app.person(Role::Viewer).await;
    let read: Value = viewer.operation(&id).await.json().await.unwrap();
    assert_eq!(read["operation"]["namespace"], "billing");
    assert_eq!(viewer.events(&id).await.status(), 200);
    assert_error(app.anonymous().operation(&id).await, 401, "unauthorized").await;
    assert_error(viewer.claim(&refund("2")).await, 403, "forbidden").await;
}

async fn many_concurrent_claims_of_one_key_start_exactly_one_operation(db: Db) {
    let app = TestApp::spawn(db).await;
    let key = app.api_key("support-bot").await;
    let claims = (0..200).map(|_| {
        let agent = app.agent_with_key(&key);
        tokio::spawn(async move { agent.claim(&refund("contended")).await.status().as_u16() })
    });
    let mut statuses = Vec::new();
    for claim in claims {
        statuses.push(claim.await.unwrap());
    }
    let started = statuses.iter().filter(|s| **s == 201).count();
    let in_progress = statuses.iter().filter(|s| **s == 409).count();
    assert_eq!(started, 1, "{statuses:?}");
    assert_eq!(in_progress, 199, "{statuses:?}");
}

async fn an_irreversible_tool_waits_for_approval_with_202(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": "irreversible" });
    let registered = admin.put_tool("wire_transfer", &policy).await;
    assert_eq!(registered.status(), 200);
    let agent = app.agent("treasury").await;
    let body =
        json!({ "tool": "wire_transfer", "key": "wire-1", "args": { "amount_cents": 1_000_000 } });

    let first = agent.claim(&body).await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["operation"]["status"], "awaiting_approval");
    assert_eq!(first["operation"]["attempt"], 0);
    assert!(
        first.get("lease").is_none(),
        "nobody may execute before approval"
    );

    let again = agent.claim(&body).await;
    assert_eq!(again.status(), 202);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["operation"]["id"], first["operation"]["id"]);
    let id = first["operation"]["id"].as_str().unwrap();
    let events: Value = agent.events(id).await.json().await.unwrap();
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["approval_requested", "blocked_awaiting_approval"]);
}

async fn a_claim_over_the_body_limit_is_413_and_stores_nothing(db: Db) {
    let app = TestApp::spawn_with(db, |config| config.max_body_bytes = 4096).await;
    let agent = app.agent("support-bot").await;
    let big = json!({ "tool": "refund", "key": "big", "args": { "blob": "x".repeat(5000) } });
    assert_error(agent.claim(&big).await, 413, "payload_too_large").await;
    let (_, _, started) = agent
        .start(&json!({ "tool": "refund", "key": "big", "args": {} }))
        .await;
    assert_eq!(
        started["operation"]["attempt"], 1,
        "the refused claim stored nothing"
    );
}

mod waiting {
    use super::*;

    on_both_databases!(
        a_claim_that_prefers_to_wait_gets_the_outcome_once_the_first_completes,
        a_wait_that_runs_out_answers_409_as_usual,
    );

    async fn claim_waiting(agent: &Client, seconds: &str, body: &Value) -> reqwest::Response {
        let request = agent
            .http
            .post(agent.url("/v1/operations"))
            .header("prefer", format!("respond-async, wait={seconds}"));
        request.json(body).send().await.unwrap()
    }

    async fn a_claim_that_prefers_to_wait_gets_the_outcome_once_the_first_completes(db: Db) {
        let app = TestApp::spawn(db).await;
        let key = app.api_key("support-bot").await;
        let agent = app.agent_with_key(&key);
        let (id, token, _) = agent.start(&refund("1")).await;

        let waiter = app.agent_with_key(&key);
        let waiting = tokio::spawn(async move { claim_waiting(&waiter, "10", &refund("1")).await });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !waiting.is_finished(),
            "the claim is held while the first runs"
        );
        let done =
            json!({ "lease_token": token, "outcome": "succeeded", "result": { "refund": "re_1" } });
        assert_eq!(agent.complete(&id, &done).await.status(), 200);

        let answer = waiting.await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["preference-applied"], "wait=10");
        let answer: Value = answer.json().await.unwrap();
        assert_eq!(answer["replayed"], true);
        assert_eq!(answer["operation"]["result"], json!({ "refund": "re_1" }));
    }

    async fn a_wait_that_runs_out_answers_409_as_usual(db: Db) {
        let app = TestApp::spawn(db).await;
        let agent = app.agent("support-bot").await;
        agent.start(&refund("1")).await;
        let started = std::time::Instant::now();
        let answer = claim_waiting(&agent, "1", &refund("1")).await;
        assert!(
            started.elapsed() >= std::time::Duration::from_secs(1),
            "held for the whole wait"
        );
        assert_eq!(answer.headers()["preference-applied"], "wait=1");
        assert_error(answer, 409, "operation_in_progress").await;
    }
}
