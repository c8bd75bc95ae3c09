//! `HttpProvider` against the real sandbox provider: every row of the executor outcome
//! table (docs/providers.md, "Outcome classes"), and reconcile lookups.

use app::ledger::{Execution, Lookup, Provider};
use idem::provider::HttpProvider;
use serde_json::{json, Value};

use crate::sandbox_helpers::TestSandbox;

/// Generous: only the timeout tests need a short one.
const TIMEOUT_MS: u32 = 30_000;

fn provider() -> HttpProvider {
    HttpProvider::new().expect("the HTTP client builds")
}

/// The error of a failed or unknown execution, and whether it is `(failed, retryable)`.
fn error_of(execution: &Execution) -> (&Value, Option<bool>) {
    match execution {
        Execution::Failed { error, retryable } => (error, Some(*retryable)),
        Execution::Unknown { error } => (error, None),
        Execution::Succeeded { .. } => panic!("expected an error, got {execution:?}"),
    }
}

#[tokio::test]
async fn a_2xx_succeeds_with_the_answer_and_the_key_reaches_the_provider() {
    let sandbox = TestSandbox::spawn().await;
    let executor = sandbox.executor("refund", TIMEOUT_MS);
    let args = json!({"order_id": "1234", "amount_cents": 500});
    let provider = provider();
    let first = provider.execute(&executor, "refund:1234", &args).await;
    let expected = Execution::Succeeded {
        result: json!({"id": "eff_1", "provider_ref": "eff_1", "name": "refund", "args": args}),
        provider_ref: Some("eff_1".into()),
    };
    assert_eq!(first, expected);
    // The same key again: the provider dedupes it, so the answer is the same and nothing new
    // happens.
    assert_eq!(
        provider.execute(&executor, "refund:1234", &args).await,
        expected
    );
    assert_eq!(sandbox.effects().await["by_key"], json!({"refund:1234": 1}));
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_failure() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }; // dropped: nothing listens there now
    let executor = app::domain::ExecutorConfig {
        url: format!("http://127.0.0.1:{port}/actions/refund"),
        reconcile_url: Some(format!("http://127.0.0.1:{port}/actions/refund/lookup")),
        timeout_ms: TIMEOUT_MS,
        provider_dedupes: false,
    };
    let provider = provider();
    let execution = provider.execute(&executor, "k1", &json!({})).await;
    let (error, retryable) = error_of(&execution);
    assert_eq!(
        (error["code"].as_str(), retryable),
        (Some("connection_failed"), Some(true))
    );
    assert!(error.get("http_status").is_none(), "{error}");
    let lookup = provider.lookup(&executor, "k1").await.unwrap_err();
    assert!(lookup.0.contains("lookup failed"), "{lookup}");

    // The same over https (outbound calls speak TLS): nothing listens, nothing was sent.
    let https = app::domain::ExecutorConfig {
        url: format!("https://127.0.0.1:{port}/actions/refund"),
        ..executor
    };
    let execution = provider.execute(&https, "k1", &json!({})).await;
    let (error, retryable) = error_of(&execution);
    assert_eq!(
        (error["code"].as_str(), retryable),
        (Some("connection_failed"), Some(true))
    );
}

#[tokio::test]
async fn a_commit_then_a_timeout_is_unknown_and_the_lookup_finds_it() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "delay_after_commit", "delay_ms": 60_000}))
        .await;
    let provider = provider();
    let executor = sandbox.executor("refund", 300);
    let execution = provider.execute(&executor, "k1", &json!({"a": 1})).await;
    let (error, retryable) = error_of(&execution);
    assert_eq!((error["code"].as_str(), retryable), (Some("timeout"), None));
    assert!(
        error["message"].as_str().unwrap().contains("300 ms"),
        "{error}"
    );

    assert!(sandbox.wait_for_total(1).await);
    let found = provider.lookup(&executor, "k1").await.unwrap();
    assert_eq!(
        found,
        Lookup::Found {
            result: json!({"id": "eff_1", "provider_ref": "eff_1", "name": "refund", "args": {"a": 1}}),
            provider_ref: Some("eff_1".into()),
        }
    );
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn a_connection_dropped_after_the_commit_is_unknown() {
    let sandbox = TestSandbox::spawn().await;
    sandbox.fault(json!({"fault": "drop_after_commit"})).await;
    let provider = provider();
    let executor = sandbox.executor("refund", TIMEOUT_MS);
    let execution = provider.execute(&executor, "k1", &json!({})).await;
    let (error, retryable) = error_of(&execution);
    assert_eq!(
        (error["code"].as_str(), retryable),
        (Some("connection_lost"), None)
    );
    assert_eq!(sandbox.total().await, 1);
    assert!(matches!(
        provider.lookup(&executor, "k1").await,
        Ok(Lookup::Found { .. })
    ));
}

#[tokio::test]
async fn a_connection_dropped_before_the_commit_is_unknown_and_the_lookup_says_not_found() {
    let sandbox = TestSandbox::spawn().await;
    sandbox.fault(json!({"fault": "drop_before_commit"})).await;
    let provider = provider();
    let executor = sandbox.executor("refund", TIMEOUT_MS);
    let execution = provider.execute(&executor, "k1", &json!({})).await;
    assert_eq!(error_of(&execution).0["code"], "connection_lost");
    assert_eq!(provider.lookup(&executor, "k1").await, Ok(Lookup::NotFound));
    assert_eq!(sandbox.total().await, 0);
}

#[tokio::test]
async fn provider_statuses_are_classified_and_commit_nothing() {
    let sandbox = TestSandbox::spawn().await;
    let provider = provider();
    let executor = sandbox.executor("refund", TIMEOUT_MS);
    let rows = [
        (503_u16, "provider_error", None),
        (500, "provider_error", None),
        (409, "provider_conflict", None),
        (429, "provider_rate_limited", Some(true)),
        (400, "provider_rejected", Some(false)),
        (404, "provider_rejected", Some(false)),
    ];
    for (status, code, retryable) in rows {
        sandbox
            .fault(json!({"fault": "fail_before_commit", "status": status}))
            .await;
        let execution = provider.execute(&executor, "k1", &json!({})).await;
        let (error, got_retryable) = error_of(&execution);
        assert_eq!(
            (
                error["code"].as_str(),
                got_retryable,
                error["http_status"].as_u64()
            ),
            (Some(code), retryable, Some(u64::from(status))),
            "{status}: {error}"
        );
        assert_eq!(
            error["provider_body"],
            json!({"error": "injected fault: fail_before_commit"})
        );
    }
    assert_eq!(sandbox.total().await, 0);
}

#[tokio::test]
async fn the_providers_own_refusals_are_classified() {
    let sandbox = TestSandbox::spawn().await;
    let provider = provider();
    let executor = sandbox.executor("refund", TIMEOUT_MS);
    provider
        .execute(&executor, "k1", &json!({"amount": 5}))
        .await;

    // The key with other arguments: the provider refuses for good.
    let reused = provider
        .execute(&executor, "k1", &json!({"amount": 6}))
        .await;
    let (error, retryable) = error_of(&reused);
    assert_eq!(retryable, Some(false));
    assert_eq!(
        error["message"],
        "the provider refused the call (422 Unprocessable Entity): idempotency key reused with different parameters"
    );

    // The key while a first call still runs: the provider may yet commit it.
    sandbox
        .fault(json!({"fault": "delay_before_commit", "delay_ms": 60_000, "key": "k2"}))
        .await;
    let first = {
        let (provider, executor) = (provider.clone(), executor.clone());
        tokio::spawn(async move { provider.execute(&executor, "k2", &json!({})).await })
    };
    assert!(sandbox.wait_for_faults_consumed().await);
    let second = provider.execute(&executor, "k2", &json!({})).await;
    let (error, retryable) = error_of(&second);
    assert_eq!(
        (error["code"].as_str(), retryable),
        (Some("provider_conflict"), None)
    );
    first.abort();
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn a_slow_provider_within_the_timeout_succeeds() {
    let sandbox = TestSandbox::spawn().await;
    sandbox
        .fault(json!({"fault": "delay_before_commit", "delay_ms": 50}))
        .await;
    let execution = provider()
        .execute(&sandbox.executor("email", TIMEOUT_MS), "k1", &json!({}))
        .await;
    assert!(
        matches!(execution, Execution::Succeeded { .. }),
        "{execution:?}"
    );
}

#[tokio::test]
async fn an_answer_over_the_size_bound_is_unknown() {
    let sandbox = TestSandbox::spawn().await;
    let provider = provider().with_body_limit(64);
    let args = json!({"text": "x".repeat(100)});
    let execution = provider
        .execute(&sandbox.executor("email", TIMEOUT_MS), "k1", &args)
        .await;
    let (error, _) = error_of(&execution);
    assert_eq!(
        (error["code"].as_str(), error["http_status"].as_u64()),
        (Some("response_too_large"), Some(200))
    );
    assert_eq!(sandbox.total().await, 1);
}

#[tokio::test]
async fn lookups_that_cannot_answer_are_errors_to_retry() {
    let sandbox = TestSandbox::spawn().await;
    let provider = provider();
    let executor = sandbox.executor("refund", 300);
    sandbox.fault(json!({"fault": "lookup_error"})).await;
    let error = provider.lookup(&executor, "k1").await.unwrap_err();
    assert!(error.0.contains("503"), "{error}");

    sandbox
        .fault(json!({"fault": "lookup_delay", "delay_ms": 60_000}))
        .await;
    let error = provider.lookup(&executor, "k1").await.unwrap_err();
    assert!(error.0.contains("within 300 ms"), "{error}");

    let mut no_url = executor.clone();
    no_url.reconcile_url = None;
    let error = provider.lookup(&no_url, "k1").await.unwrap_err();
    assert!(error.0.contains("reconcile_url"), "{error}");

    let mut nonsense = executor.clone();
    nonsense.reconcile_url = Some(format!("{}/healthz", sandbox.address));
    let error = provider.lookup(&nonsense, "k1").await.unwrap_err();
    assert!(error.0.contains("\"found\""), "{error}");

    assert_eq!(provider.lookup(&executor, "k1").await, Ok(Lookup::NotFound));
}
