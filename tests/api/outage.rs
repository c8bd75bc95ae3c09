//! A PostgreSQL outage under load: while the database is down every request is answered
//! `503 database_unavailable` with `Retry-After` (never 500), idem recovers by itself when
//! the database is back, and nothing it acknowledged is lost. The database is a cluster made
//! for this test (initdb), never the machine's main one, which other tests share.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::helpers::Client;
use crate::processes::{cli_key, ServerProcess};

/// A PostgreSQL cluster of this test's own, in a temporary folder, removed when dropped.
struct ThrowawayCluster {
    root: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Whether commands must run as the `postgres` user (PostgreSQL refuses to run as root).
    as_postgres: bool,
}

impl ThrowawayCluster {
    fn create() -> Self {
        let bin = postgres_bin().expect("PostgreSQL's server programs (initdb, pg_ctl)");
        let root = std::env::temp_dir().join(format!("idem-outage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown").args(["postgres:", &root.display().to_string()]));
        }
        let port = free_port();
        let cluster = Self {
            root,
            bin,
            port,
            as_postgres,
        };
        let data = cluster.data().display().to_string();
        cluster.pg(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        );
        cluster.start();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.root.display()
        );
        let log = self.root.join("server.log").display().to_string();
        let data = self.data().display().to_string();
        self.pg(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-o", &options, "-w", "start"],
        );
    }

    /// A fast shutdown: sessions are ended, the server stops accepting connections.
    fn stop(&self) {
        let data = self.data().display().to_string();
        self.pg("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]);
    }

    fn pg(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        run(command.args(args).current_dir(&self.root));
    }
}

impl Drop for ThrowawayCluster {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let program = self.bin.join("pg_ctl");
        let args = ["-D", &data, "-m", "immediate", "-w", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(program)
                .args(args)
                .output()
        } else {
            Command::new(program).args(args).output()
        };
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The newest installed PostgreSQL's server programs (Debian keeps them off the PATH).
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent()
            .and_then(Path::file_name)
            .and_then(|version| version.to_str()?.parse::<u32>().ok())
    });
    found.pop()
}

fn is_root() -> bool {
    let output = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(output.status.success(), "{command:?}: {output:?}");
}

/// What the load saw: each answer's phase (when its request started), status, error code
/// and `Retry-After`; and the completions idem acknowledged (claim body, result).
#[derive(Default)]
struct Seen {
    answers: Vec<(Phase, u16, Option<String>, Option<String>)>,
    acknowledged: Vec<(Value, Value)>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Phase {
    Before,
    Down,
    After,
}

/// Claims and completes new keys in a loop until told to stop, noting what it saw.
async fn load(
    agent: Client,
    worker: usize,
    phase: Arc<Mutex<Phase>>,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let body = json!({ "tool": "refund", "key": format!("w{worker}-{n}"), "args": { "n": n } });
        let started = *phase.lock().unwrap();
        let (status, claimed) = note(&seen, started, agent.claim(&body).await).await;
        if status != 201 {
            if status == 503 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            continue;
        }
        let id = claimed["operation"]["id"].as_str().unwrap().to_owned();
        let token = claimed["lease"]["token"].as_str().unwrap().to_owned();
        let result = json!({ "refund": n, "worker": worker });
        let done = json!({ "lease_token": token, "outcome": "succeeded", "result": result });
        let started = *phase.lock().unwrap();
        let (status, _) = note(&seen, started, agent.complete(&id, &done).await).await;
        if status == 200 {
            seen.lock().unwrap().acknowledged.push((body, result));
        }
    }
}

/// Notes an answer's status, error code and `Retry-After`; returns the status and body.
async fn note(seen: &Mutex<Seen>, phase: Phase, response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().to_owned());
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().map(str::to_owned);
    seen.lock()
        .unwrap()
        .answers
        .push((phase, status, code, retry_after));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_outage_under_load_is_answered_503_and_loses_nothing_acknowledged() {
    let cluster = ThrowawayCluster::create();
    let key = cli_key(&cluster.url(), "billing");
    let server = ServerProcess::start(&cluster.url());
    let phase = Arc::new(Mutex::new(Phase::Before));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|worker| {
            let agent = server.agent(&key);
            tokio::spawn(load(
                agent,
                worker,
                phase.clone(),
                seen.clone(),
                stop.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;

    *phase.lock().unwrap() = Phase::Down;
    tokio::task::block_in_place(|| cluster.stop());
    let probe = server.agent(&key);
    let down = probe
        .claim(&json!({ "tool": "refund", "key": "probe", "args": {} }))
        .await;
    assert_eq!(down.status(), 503);
    assert_eq!(down.headers()["retry-after"], "2");
    let down: Value = down.json().await.unwrap();
    assert_eq!(down["error"]["code"], "database_unavailable", "{down}");
    assert_eq!(probe.get("/readyz").await.status(), 503);
    tokio::time::sleep(Duration::from_secs(3)).await;

    tokio::task::block_in_place(|| cluster.start());
    let mut ready = false;
    for _ in 0..150 {
        if probe.get("/readyz").await.status() == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ready,
        "idem is ready again by itself once the database is back"
    );
    *phase.lock().unwrap() = Phase::After;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.unwrap();
    }

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let unexpected: Vec<_> = seen
        .answers
        .iter()
        .filter(|(_, status, _, _)| !matches!(status, 200 | 201 | 503))
        .collect();
    assert!(
        unexpected.is_empty(),
        "only 503s while down: {unexpected:?}"
    );
    let refusals: Vec<_> = seen
        .answers
        .iter()
        .filter(|(_, status, _, _)| *status == 503)
        .collect();
    assert!(
        refusals.iter().all(|(_, _, code, retry_after)| {
            code.as_deref() == Some("database_unavailable") && retry_after.as_deref() == Some("2")
        }),
        "every 503 says the database is unavailable and when to retry: {refusals:?}"
    );
    let succeeded_in = |wanted: Phase| {
        seen.answers
            .iter()
            .filter(|(phase, status, _, _)| *phase == wanted && *status == 201)
            .count()
    };
    assert!(
        succeeded_in(Phase::Before) > 0,
        "the load ran before the outage"
    );
    assert!(
        succeeded_in(Phase::After) > 0,
        "and again after it, with no restart of idem"
    );

    let agent = server.agent(&key);
    for (body, result) in &seen.acknowledged {
        let replay = agent.claim(body).await;
        assert_eq!(replay.status(), 200, "{body}");
        let replay: Value = replay.json().await.unwrap();
        assert_eq!(&replay["operation"]["result"], result, "{body}");
    }
}
