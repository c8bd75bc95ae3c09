//! `GET /v1/operations/changes`: every committed change of an operation reaches every
//! subscriber allowed to see it, once, on whichever process it subscribed.

use app::domain::Role;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::timeout;

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;
use crate::processes::{cli_key, ServerProcess};
use idem::storage::testing::TestDatabase;

on_both_databases!(
    a_subscriber_sees_an_operation_start_and_succeed_once_each,
    an_agent_sees_only_the_changes_of_its_own_namespace,
    an_open_stream_ends_when_the_server_stops_and_does_not_hold_it,
);

/// A subscriber of the change stream, reading its events as they arrive.
struct ChangeStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl ChangeStream {
    async fn open(client: &Client) -> Self {
        let response = client.get("/v1/operations/changes").await;
        assert_eq!(response.status(), 200, "subscribe");
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// Whether the server ended the stream cleanly (waiting at most 10 s).
    async fn ends(&mut self) -> bool {
        loop {
            let chunk = timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("the stream ends within 10 s");
            match chunk {
                Ok(Some(_)) => continue,
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// The data of the next `operation` event (keep-alive comments are skipped).
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(data) = operation_data(&String::from_utf8(block).unwrap()) {
                    return data;
                }
                continue;
            }
            let chunk = timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("a change arrives within 10 s")
                .expect("the stream is readable")
                .expect("the stream stays open");
            self.buffer.extend_from_slice(&chunk);
        }
    }
}

/// The JSON of an `event: operation` block; `None` for a comment.
fn operation_data(block: &str) -> Option<Value> {
    let mut event = None;
    let mut data = None;
    for line in block.lines() {
        if let Some(name) = line.strip_prefix("event:") {
            event = Some(name.trim().to_owned());
        } else if let Some(json) = line.strip_prefix("data:") {
            data = Some(serde_json::from_str(json.trim()).expect("the data is JSON"));
        }
    }
    let data = data?;
    assert_eq!(event.as_deref(), Some("operation"), "{block}");
    Some(data)
}

fn refund(key: &str) -> Value {
    json!({ "tool": "refund", "key": key, "args": { "amount_cents": 500 } })
}

/// Claims then completes an operation through `agent`; returns its id.
async fn start_and_succeed(agent: &Client, key: &str) -> String {
    let (id, token, _) = agent.start(&refund(key)).await;
    let completion = json!({ "lease_token": token, "outcome": "succeeded", "result": {} });
    assert_eq!(agent.complete(&id, &completion).await.status(), 200);
    id
}

fn assert_change(change: &Value, id: &str, namespace: &str, status: &str) {
    assert_eq!(change["id"], id, "{change}");
    assert_eq!(change["namespace"], namespace, "{change}");
    assert_eq!(change["status"], status, "{change}");
    assert!(change["at"].is_string(), "{change}");
}

async fn a_subscriber_sees_an_operation_start_and_succeed_once_each(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("billing").await;
    let mut stream = ChangeStream::open(&app.person(Role::Viewer).await).await;

    let id = start_and_succeed(&agent, "r-1").await;
    assert_change(&stream.next().await, &id, "billing", "pending");
    assert_change(&stream.next().await, &id, "billing", "succeeded");

    // A replay commits nothing, so it is no change; the next change is the next claim's,
    // which also shows that no change came twice.
    assert_eq!(agent.claim(&refund("r-1")).await.status(), 200);
    let (next, _, _) = agent.start(&refund("r-2")).await;
    assert_change(&stream.next().await, &next, "billing", "pending");
}

async fn an_agent_sees_only_the_changes_of_its_own_namespace(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent_a = app.agent("ns-a").await;
    let agent_b = app.agent("ns-b").await;
    let mut stream_b = ChangeStream::open(&agent_b).await;

    start_and_succeed(&agent_a, "a-1").await;
    let (own, _, _) = agent_b.start(&refund("b-1")).await;
    assert_change(&stream_b.next().await, &own, "ns-b", "pending");
}

#[tokio::test]
async fn postgres_a_change_made_through_one_process_reaches_a_subscriber_of_another() {
    let database = TestDatabase::create(Db::Postgres).await;
    let first = ServerProcess::start(database.url());
    let second = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let mut stream = ChangeStream::open(&second.agent(&key)).await;

    let id = start_and_succeed(&first.agent(&key), "r-1").await;
    assert_change(&stream.next().await, &id, "billing", "pending");
    assert_change(&stream.next().await, &id, "billing", "succeeded");
    // Made on the subscriber's own process: heard once, through the database.
    let (next, _, _) = second.agent(&key).start(&refund("r-2")).await;
    assert_change(&stream.next().await, &next, "billing", "pending");
}

async fn an_open_stream_ends_when_the_server_stops_and_does_not_hold_it(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let mut stream = ChangeStream::open(&server.agent(&key)).await;

    let stopping = tokio::task::spawn_blocking(move || server.terminate());
    let (clean, log) = timeout(Duration::from_secs(30), stopping)
        .await
        .expect("SIGTERM stops the server despite an open stream")
        .unwrap();
    assert!(clean, "a clean exit: {log:?}");
    assert!(stream.ends().await, "the server ended the stream");
}
