//! The real binary as separate processes: crashes, restarts, graceful stops, and several
//! servers sharing one PostgreSQL database.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::helpers::{Client, Db};
use crate::on_both_databases;
use app::domain::{ToolName, ToolPolicy};
use idem::storage::testing::TestDatabase;
use idem::storage::Database;

on_both_databases!(
    every_acknowledged_completion_survives_a_kill_9,
    sigterm_lets_requests_in_flight_finish
);

/// An `idem serve` child process, killed when dropped.
pub struct ServerProcess {
    child: Child,
    pub address: String,
    log: mpsc::Receiver<String>,
    stdout: mpsc::Receiver<String>,
}

impl ServerProcess {
    /// Starts `idem serve` on a free port of loopback against the database.
    pub fn start(database_url: &str) -> Self {
        Self::start_with_env(database_url, &[])
    }

    /// Starts `idem serve` with extra environment variables.
    pub fn start_with_env(database_url: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with(database_url, &[], env)
    }

    /// Starts `idem serve` with extra arguments and environment variables.
    pub fn start_with(database_url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(args)
            .env("IDEM_DATABASE_URL", database_url)
            .env("IDEM_LOG", "debug")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start idem serve");
        let log = read_lines(child.stderr.take().unwrap());
        let stdout = read_lines(child.stdout.take().unwrap());
        let mut seen = Vec::new();
        let address = loop {
            // A server that dies early closes its stderr, which ends this wait.
            let Ok(line) = log.recv_timeout(std::time::Duration::from_secs(30)) else {
                let _ = child.kill();
                panic!("idem serve never said where it listens: {seen:?}");
            };
            // Only the server's own line: a demo's sandbox logs an address of its own.
            let listening = line.contains("idem is listening");
            if let Some(rest) = line.split("address=").nth(1).filter(|_| listening) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
            seen.push(line);
        };
        Self {
            child,
            address: format!("http://{address}"),
            log,
            stdout,
        }
    }

    /// The next line the server prints on stdout, waiting up to `timeout`.
    pub fn stdout_line(&self, timeout: std::time::Duration) -> Option<String> {
        self.stdout.recv_timeout(timeout).ok()
    }

    /// A client of this server holding the API key.
    pub fn agent(&self, key: &str) -> Client {
        Client::with_bearer(&self.address, key)
    }

    /// The log lines printed so far.
    pub fn drain_log(&mut self) -> Vec<String> {
        self.log.try_iter().collect()
    }

    /// SIGKILL: no chance to flush or finish anything.
    pub fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the exit; returns whether it exited cleanly, and its log.
    pub fn terminate(mut self) -> (bool, Vec<String>) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let status = self.child.wait().unwrap();
        // Until the reader thread has seen the end of stderr, so the last lines are in.
        let log: Vec<String> = self.log.iter().collect();
        (status.success(), log)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of a child's output, read on a thread of their own.
fn read_lines(output: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Registers `tool` with `policy` straight in the database, before a server runs on it.
pub async fn put_tool_directly(database_url: &str, tool: &str, policy: &ToolPolicy) {
    let database = Database::open(database_url).await.unwrap();
    let name = ToolName::try_from(tool).unwrap();
    database
        .ledger_store()
        .put_tool(&name, policy)
        .await
        .unwrap();
    database.close().await;
}

/// Creates an API key with the CLI, as an operator would.
pub fn cli_key(database_url: &str, namespace: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["keys", "create", "--namespace", namespace])
        .env("IDEM_DATABASE_URL", database_url)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A person of the operator role, created with the CLI as an operator would, signed in to
/// `server`.
pub async fn cli_operator(server: &ServerProcess, database_url: &str) -> Client {
    let args = [
        "users",
        "create",
        "--username",
        "olga",
        "--role",
        "operator",
        "--password-stdin",
    ];
    let created = crate::cli::idem(&args, database_url, Some("olga's password\n"));
    assert!(created.status.success(), "{created:?}");
    let operator = Client::new(&server.address, reqwest::header::HeaderMap::new());
    assert_eq!(
        operator.login("olga", "olga's password").await.status(),
        200
    );
    operator
}

async fn every_acknowledged_completion_survives_a_kill_9(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let agent = server.agent(&key);

    let mut acknowledged = Vec::new();
    for n in 0..20 {
        let body = json!({ "tool": "refund", "key": format!("order-{n}"), "args": { "n": n } });
        let (id, token, _) = agent.start(&body).await;
        let done =
            json!({ "lease_token": token, "outcome": "succeeded", "result": { "refund": n } });
        let response = agent.complete(&id, &done).await;
        assert_eq!(response.status(), 200);
        acknowledged.push(body);
    }
    // One more claimed but never completed: after the crash it is still in flight.
    let (open_id, _, _) = agent
        .start(&json!({ "tool": "refund", "key": "open", "args": {} }))
        .await;
    server.kill_9();

    let restarted = ServerProcess::start(database.url());
    let agent = restarted.agent(&key);
    for (n, body) in acknowledged.iter().enumerate() {
        let replay = agent.claim(body).await;
        assert_eq!(replay.status(), 200, "order-{n} after the crash");
        let replay: Value = replay.json().await.unwrap();
        assert_eq!(replay["operation"]["result"], json!({ "refund": n }));
    }
    let open: Value = agent.operation(&open_id).await.json().await.unwrap();
    assert_eq!(open["operation"]["status"], "pending");
}

async fn sigterm_lets_requests_in_flight_finish(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let agent = server.agent(&key);
    let body = json!({ "tool": "refund", "key": "held", "args": {} });
    agent.start(&body).await;

    // A duplicate that prefers to wait two seconds is in flight when SIGTERM arrives.
    let waiter = server.agent(&key);
    let in_flight = tokio::spawn(async move {
        let request = waiter
            .http
            .post(waiter.url("/v1/operations"))
            .header("prefer", "wait=2");
        request
            .json(&body)
            .send()
            .await
            .map(|response| response.status().as_u16())
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (clean, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();

    assert_eq!(
        in_flight
            .await
            .unwrap()
            .expect("the in-flight request was answered"),
        409
    );
    assert!(clean, "exit status after SIGTERM: {log:?}");
    assert!(
        log.iter().any(|line| line.contains("idem stopped")),
        "{log:?}"
    );
}

/// One server per SQLite file: it answers replays from memory, which only the process that
/// alone changes the file may do. A second one is refused; the command line still works.
#[tokio::test]
async fn sqlite_a_second_server_on_the_same_file_is_refused() {
    let database = TestDatabase::create(Db::Sqlite).await;
    let first = ServerProcess::start(database.url());
    let second = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("IDEM_DATABASE_URL", database.url())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another idem server is serving this SQLite file"),
        "{stderr}"
    );
    let key = cli_key(database.url(), "billing");
    assert_eq!(first.agent(&key).me().await.status(), 200);
}

/// Two server processes on one PostgreSQL database: 500 concurrent claims of one new key,
/// spread over both, start exactly one operation. (SQLite serves one process only.)
#[tokio::test]
async fn postgres_two_servers_500_concurrent_claims_of_one_key_start_exactly_one_operation() {
    let database = TestDatabase::create(Db::Postgres).await;
    let first = ServerProcess::start(database.url());
    let second = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let body = json!({ "tool": "refund", "key": "contended", "args": { "order": 1 } });

    let mut claims = Vec::new();
    for n in 0..500 {
        let server = if n % 2 == 0 { &first } else { &second };
        let agent = server.agent(&key);
        let body = body.clone();
        claims.push(tokio::spawn(async move {
            agent.claim(&body).await.status().as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for claim in claims {
        statuses.push(claim.await.unwrap());
    }
    let started = statuses.iter().filter(|s| **s == 201).count();
    let others_ok = statuses.iter().all(|s| matches!(s, 201 | 409 | 200));
    assert_eq!(started, 1, "exactly one claim starts the operation");
    assert!(
        others_ok,
        "every other claim is told it is in progress: {statuses:?}"
    );

    let agent = first.agent(&key);
    let listed: Value = agent.list("?limit=200").await.json().await.unwrap();
    assert_eq!(
        listed["operations"].as_array().unwrap().len(),
        1,
        "one operation in the ledger"
    );
    let id = listed["operations"][0]["id"].as_str().unwrap().to_owned();
    // Refused duplicates are written behind their answers: this process's at once when its
    // events are read, the other's a moment later. The trail converges; it is never short.
    let mut kinds = audit_trail(&agent, &id).await;
    let converging = Instant::now();
    while count(&kinds, "in_flight_rejected") < 499 && converging.elapsed() < CONVERGENCE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        kinds = audit_trail(&agent, &id).await;
    }
    assert_eq!(count(&kinds, "claimed"), 1);
    assert_eq!(
        count(&kinds, "in_flight_rejected"),
        499,
        "every duplicate is audited"
    );
}

/// Two server processes on one PostgreSQL database, each answering replays from memory: once
/// a person's expiry through the second has answered, the first never replays the expired
/// outcome — the next claim there starts a new operation.
#[tokio::test]
async fn postgres_an_expiry_through_one_server_is_never_replayed_by_the_other_from_memory() {
    let database = TestDatabase::create(Db::Postgres).await;
    let first = ServerProcess::start(database.url());
    let second = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let operator = cli_operator(&second, database.url()).await;
    let agent = first.agent(&key);

    for round in 0..5 {
        let body = json!({ "tool": "refund", "key": format!("order-{round}"), "args": { "round": round } });
        let (id, token, _) = agent.start(&body).await;
        let done =
            json!({ "lease_token": token, "outcome": "succeeded", "result": { "n": round } });
        assert_eq!(agent.complete(&id, &done).await.status(), 200);
        for _ in 0..20 {
            assert_eq!(agent.claim(&body).await.status(), 200, "replayed");
        }
        let reason = json!({ "reason": "the customer asked again" });
        assert_eq!(operator.expire(&id, &reason).await.status(), 200);
        let next = agent.claim(&body).await;
        assert_eq!(
            next.status(),
            201,
            "round {round}: a new operation, not the expired outcome"
        );
        let next: Value = next.json().await.unwrap();
        assert_ne!(next["operation"]["id"], id.as_str());
    }
}

/// How long another process's events written behind may take to show up, at most; far more
/// than they need (their writer starts on the first event).
const CONVERGENCE: Duration = Duration::from_secs(10);

async fn audit_trail(agent: &Client, id: &str) -> Vec<String> {
    let events: Value = agent.events(id).await.json().await.unwrap();
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn count(kinds: &[String], kind: &str) -> usize {
    kinds.iter().filter(|k| *k == kind).count()
}

/// Secrets in a tool's arguments never reach the database file, the log or any answer.
#[tokio::test]
async fn sqlite_secrets_in_args_never_reach_the_file_the_log_or_an_answer() {
    let database = TestDatabase::create(Db::Sqlite).await;
    let mut server = ServerProcess::start(database.url());
    let key = cli_key(database.url(), "billing");
    let agent = server.agent(&key);
    let secrets = [
        "hunter2-PASSWORD-x1",
        "sk_live_SECRETKEY_x2",
        "4111111111111111",
        "5500 0000 0000 0004",
    ];
    let args = json!({
        "customer": { "password": secrets[0], "apiKey": secrets[1] },
        "card": { "number": secrets[2], "exp": "12/30" },
        "note": secrets[3],
        "amount_cents": 500,
    });
    let (id, token, started) = agent
        .start(&json!({ "tool": "charge", "key": "charge-1", "args": args }))
        .await;
    let done =
        json!({ "lease_token": token, "outcome": "succeeded", "result": { "charge": "ch_1" } });
    let completed = agent.complete(&id, &done).await.text().await.unwrap();
    let replay = agent
        .claim(&json!({ "tool": "charge", "key": "charge-1", "args": args }))
        .await
        .text()
        .await
        .unwrap();
    let read = agent.operation(&id).await.text().await.unwrap();
    let listed = agent.list("").await.text().await.unwrap();
    let events = agent.events(&id).await.text().await.unwrap();
    assert_eq!(started["operation"]["args"]["card"]["number"], "[redacted]");
    assert!(
        replay.contains("\"replayed\":true"),
        "same args, same fingerprint: {replay}"
    );

    let log = server.drain_log();
    server.kill_9();
    let path = database.sqlite_path().unwrap().to_owned();
    let mut stored = Vec::new();
    for suffix in ["", "-wal"] {
        if let Ok(bytes) = std::fs::read(format!("{}{suffix}", path.display())) {
            stored.extend(bytes);
        }
    }
    assert!(stored.len() > 4096, "the database was read");
    let answers = [started.to_string(), completed, replay, read, listed, events];
    for secret in secrets {
        let needle = secret.as_bytes();
        assert!(
            !stored.windows(needle.len()).any(|w| w == needle),
            "{secret} is in the database file"
        );
        assert!(
            !log.iter().any(|line| line.contains(secret)),
            "{secret} is in the log"
        );
        assert!(
            !answers.iter().any(|answer| answer.contains(secret)),
            "{secret} is in an answer"
        );
    }
}
