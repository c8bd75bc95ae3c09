//! Nothing dies silently: a worker or the SQLite writer that panics is logged and restarted,
//! `/readyz` says what is down meanwhile, and a request whose change was lost to a panic is
//! told to retry (503), never left hanging or answered 500. Panics are injected with
//! failpoints in real server processes.

use serde_json::{json, Value};
use std::time::Duration;

use crate::helpers::{Client, Db};
use crate::on_both_databases;
use crate::processes::{cli_key, put_tool_directly, ServerProcess};
use app::domain::ToolPolicy;
use idem::storage::testing::TestDatabase;

on_both_databases!(
    a_worker_that_keeps_panicking_is_restarted_and_readyz_says_it_is_down,
    a_worker_that_panicked_once_is_restarted_and_does_its_work,
);

/// Registers `tool` with a one-second lease, straight in the database.
async fn register_short_lease(database_url: &str, tool: &str) {
    let policy = ToolPolicy {
        lease_seconds: 1,
        ..ToolPolicy::default_for_unregistered()
    };
    put_tool_directly(database_url, tool, &policy).await;
}

/// `/readyz`: its status and its body.
async fn readiness(agent: &Client) -> (u16, Value) {
    let response = agent.get("/readyz").await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Counts the log lines so far that contain `text`, adding them to `log`.
fn count_in_log(server: &mut ServerProcess, log: &mut Vec<String>, text: &str) -> usize {
    log.extend(server.drain_log());
    log.iter().filter(|line| line.contains(text)).count()
}

async fn a_worker_that_keeps_panicking_is_restarted_and_readyz_says_it_is_down(db: Db) {
    let database = TestDatabase::create(db).await;
    let key = cli_key(database.url(), "billing");
    let mut server =
        ServerProcess::start_with_env(database.url(), &[("IDEM_FAILPOINT", "lease_reaper_round")]);
    let agent = server.agent(&key);
    let mut log = Vec::new();
    let mut panics = 0;
    for _ in 0..100 {
        panics = count_in_log(&mut server, &mut log, "a background worker panicked");
        if panics >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        panics >= 3,
        "the reaper was restarted after each panic: {log:#?}"
    );
    let (status, body) = readiness(&agent).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "service_unavailable");
    assert_eq!(
        body["error"]["details"]["workers_down"],
        json!(["lease_reaper"])
    );
    assert_eq!(body["error"]["details"]["database"], "ok");

    // The rest of the server works meanwhile.
    let claimed = agent
        .claim(&json!({ "tool": "refund", "key": "r-1", "args": {} }))
        .await;
    assert_eq!(claimed.status(), 201);
}

async fn a_worker_that_panicked_once_is_restarted_and_does_its_work(db: Db) {
    let database = TestDatabase::create(db).await;
    let key = cli_key(database.url(), "billing");
    register_short_lease(database.url(), "payout").await;
    let mut server = ServerProcess::start_with_env(
        database.url(),
        &[
            ("IDEM_FAILPOINT", "lease_reaper_round:1"),
            ("IDEM_LEASE_REAPER_INTERVAL_MS", "100"),
        ],
    );
    let agent = server.agent(&key);
    let mut log = Vec::new();
    for _ in 0..100 {
        if count_in_log(&mut server, &mut log, "a background worker panicked") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        count_in_log(&mut server, &mut log, "a background worker panicked"),
        1,
        "{log:#?}"
    );

    // The restarted reaper turns a lease that ran out into `unknown` with no claim to
    // notice it: only the reaper does that.
    let (id, _, _) = agent
        .start(&json!({ "tool": "payout", "key": "p-1", "args": {} }))
        .await;
    let mut status = Value::Null;
    for _ in 0..100 {
        let operation: Value = agent.operation(&id).await.json().await.unwrap();
        status = operation["operation"]["status"].clone();
        if status == "unknown" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "unknown", "the restarted reaper expired the lease");
    let mut ready = readiness(&agent).await;
    for _ in 0..50 {
        if ready.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        ready = readiness(&agent).await;
    }
    assert_eq!(ready.0, 200, "up again once the restart held: {}", ready.1);
    assert!(count_in_log(&mut server, &mut log, "restarting a background worker") >= 1);
}

#[tokio::test]
async fn a_write_lost_to_a_panic_of_the_sqlite_writer_is_answered_503_and_nothing_is_kept() {
    let database = TestDatabase::create(Db::Sqlite).await;
    let key = cli_key(database.url(), "billing");
    let mut server = ServerProcess::start_with_env(
        database.url(),
        &[("IDEM_FAILPOINT", "sqlite_writer_listed_batch:1")],
    );
    let agent = server.agent(&key);
    let body = json!({ "tool": "refund", "key": "order-1", "args": { "amount": 5 } });

    let lost = agent.claim(&body).await;
    assert_eq!(lost.status(), 503);
    assert_eq!(
        lost.headers()["retry-after"].to_str().unwrap(),
        "2",
        "a caller is told when to retry"
    );
    let lost: Value = lost.json().await.unwrap();
    assert_eq!(lost["error"]["code"], "database_unavailable");

    // The writer is back; the lost claim left nothing behind, so the retry claims afresh.
    let mut retried = agent.claim(&body).await;
    for _ in 0..50 {
        if retried.status() != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        retried = agent.claim(&body).await;
    }
    assert_eq!(retried.status(), 201, "a fresh claim after the restart");
    let listed: Value = agent.list("?tool=refund").await.json().await.unwrap();
    assert_eq!(listed["operations"].as_array().unwrap().len(), 1);
    let log = server.drain_log();
    assert!(
        log.iter()
            .any(|line| line.contains("the SQLite writer panicked")),
        "{log:#?}"
    );
}
