//! The ambiguous moments that need real processes: idem killed (SIGKILL) between the
//! provider's answer and the ledger's record of it, and several idem processes on one
//! PostgreSQL database invoking one key at once. Exactly one effect, every time.

use app::domain::ToolPolicy;
use serde_json::{json, Value};

use crate::faults::{assert_in_order, wait_for_status};
use crate::helpers::{Client, Db};
use crate::on_both_databases;
use crate::processes::{cli_key, put_tool_directly, ServerProcess};
use crate::sandbox_helpers::TestSandbox;
use idem::storage::testing::TestDatabase;

on_both_databases!(idem_killed_between_the_providers_answer_and_its_record_converges_to_one_effect);

/// Registers a non-idempotent tool run by the sandbox, straight in the database.
async fn register(database_url: &str, sandbox: &TestSandbox, tool: &str, timeout_ms: u32) {
    let mut executor = sandbox.executor(tool, timeout_ms);
    executor.provider_dedupes = false;
    let policy = ToolPolicy {
        lease_seconds: 1,
        executor: Some(executor),
        ..ToolPolicy::default_for_unregistered()
    };
    put_tool_directly(database_url, tool, &policy).await;
}

async fn idem_killed_between_the_providers_answer_and_its_record_converges_to_one_effect(db: Db) {
    let sandbox = TestSandbox::spawn().await;
    let database = TestDatabase::create(db).await;
    register(database.url(), &sandbox, "payout", 500).await;
    let key = cli_key(database.url(), "treasury");
    let mut doomed = ServerProcess::start_with_env(
        database.url(),
        &[("IDEM_FAILPOINT", "invoke_after_execute")],
    );
    let payout = json!({ "key": "payout:42", "args": { "iban": "DE00", "amount": 900 } });

    let in_flight = {
        let agent = doomed.agent(&key);
        let payout = payout.clone();
        tokio::spawn(async move { agent.invoke("payout", &payout).await })
    };
    assert!(sandbox.wait_for_total(1).await, "the provider committed");
    let mut reached = false;
    for _ in 0..100 {
        reached |= doomed
            .drain_log()
            .iter()
            .any(|line| line.contains("failpoint reached"));
        if reached {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(reached, "idem stopped between the answer and its record");
    tokio::task::spawn_blocking(move || doomed.kill_9())
        .await
        .unwrap();
    assert!(in_flight.await.is_err(), "the caller never got an answer");

    // A new process: the lease runs out, the operation turns unknown, reconciliation finds
    // the effect the first process never recorded.
    let server = ServerProcess::start(database.url());
    let agent = server.agent(&key);
    let listed: Value = agent.list("?tool=payout").await.json().await.unwrap();
    let id = listed["operations"][0]["id"].as_str().unwrap().to_owned();
    let settled = wait_for_status(&agent, &id, "succeeded").await;
    assert_eq!(settled["provider_ref"], "eff_1");
    assert_eq!(sandbox.effects_of_operation(&settled).await, 1);

    let replay = agent.invoke("payout", &payout).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(
        sandbox.effects_of_operation(&settled).await,
        1,
        "exactly one effect"
    );
    let (kinds, _) = agent.event_kinds(&id).await;
    assert_in_order(
        &kinds,
        &["claimed", "lease_expired", "reconciled", "replayed"],
    );
}

/// Two idem processes on one PostgreSQL database, 500 concurrent invokes of one key, spread
/// over both: the provider sees one call.
#[tokio::test]
async fn postgres_two_servers_500_concurrent_invokes_of_one_key_take_effect_once() {
    let sandbox = TestSandbox::spawn().await;
    let database = TestDatabase::create(Db::Postgres).await;
    register(database.url(), &sandbox, "refund", 5000).await;
    let first = ServerProcess::start(database.url());
    let second = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    // The first call stays in flight while the others arrive.
    sandbox
        .fault(json!({ "fault": "delay_before_commit", "delay_ms": 1000 }))
        .await;
    let refund = json!({ "key": "refund:contended", "args": { "order": 1 } });

    let mut invokes = tokio::task::JoinSet::new();
    for n in 0..500 {
        let server = if n % 2 == 0 { &first } else { &second };
        let (agent, refund): (Client, Value) = (server.agent(&key), refund.clone());
        invokes.spawn(async move { agent.invoke("refund", &refund).await.status().as_u16() });
    }
    let statuses = invokes.join_all().await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 201 | 409 | 200)),
        "every other invoke is told it is in progress or replayed: {statuses:?}"
    );
    let replay: Value = first
        .agent(&key)
        .invoke("refund", &refund)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(sandbox.effects_of_operation(&replay["operation"]).await, 1);
    assert_eq!(sandbox.total().await, 1, "the provider saw one call");
}
