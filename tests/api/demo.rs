//! `idem serve --demo`: the real binary with demo data, watched through the API as the printed
//! admin would watch it in the browser.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::helpers::{Client, Db};
use crate::on_both_databases;
use crate::processes::{cli_key, ServerProcess};
use idem::storage::testing::TestDatabase;

on_both_databases!(
    the_demo_prints_how_to_sign_in_and_fills_the_ledger_with_every_kind_of_moment,
    without_the_demo_flag_no_tools_and_no_operations_are_made_up,
    a_restarted_demo_gives_its_people_new_passwords_and_its_agent_a_new_key,
);

mod refusals;

/// A brisk demo, so that everything has happened within seconds.
const BRISK: [(&str, &str); 2] = [
    ("IDEM_DEMO_PACE_MS", "40"),
    ("IDEM_RECONCILE_INTERVAL_MS", "100"),
];

const SIGN_IN: &str = "demo: sign in at ";

/// The `demo: sign in at URL/login as USER with password PW` lines: user → (URL, password).
fn sign_in_lines(server: &ServerProcess) -> BTreeMap<String, (String, String)> {
    let mut people = BTreeMap::new();
    while people.len() < 4 {
        let Some(line) = server.stdout_line(Duration::from_secs(30)) else {
            panic!("the demo printed only {people:?}");
        };
        let Some(rest) = line.strip_prefix(SIGN_IN) else {
            continue;
        };
        let words: Vec<&str> = rest.split(' ').collect();
        assert!(
            matches!(words[..], [_, "as", _, "with", "password", _]),
            "{line}"
        );
        let entry = (words[0].to_owned(), words[5].to_owned());
        people.insert(words[2].to_owned(), entry);
    }
    people
}

/// What the admin sees: operation statuses and the hour's counters.
#[derive(Debug, Default)]
struct Seen {
    statuses: BTreeSet<String>,
    metrics: Value,
}

impl Seen {
    async fn now(admin: &Client) -> Self {
        let listed = json_of(admin, "/v1/operations?limit=200").await;
        let statuses = listed["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|op| op["status"].as_str().unwrap().to_owned())
            .collect();
        let metrics = json_of(admin, "/v1/metrics?window=1h").await;
        Self { statuses, metrics }
    }

    fn count(&self, counter: &str) -> u64 {
        self.metrics[counter].as_u64().unwrap()
    }

    fn has_everything(&self) -> bool {
        ["succeeded", "failed", "awaiting_approval"]
            .iter()
            .all(|status| self.statuses.contains(*status))
            && [
                "duplicates_prevented",
                "in_flight_rejected",
                "mismatches_rejected",
                "reconciliations",
            ]
            .iter()
            .all(|counter| self.count(counter) > 0)
    }
}

pub(super) async fn json_of(client: &Client, path: &str) -> Value {
    let response = client.get(path).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

async fn the_demo_prints_how_to_sign_in_and_fills_the_ledger_with_every_kind_of_moment(db: Db) {
    let database = TestDatabase::create(db).await;
    let mut server = ServerProcess::start_with(database.url(), &["--demo"], &BRISK);
    let people = sign_in_lines(&server);
    let names: Vec<&str> = people.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "demo-admin",
            "demo-approver",
            "demo-operator",
            "demo-viewer"
        ]
    );
    let (url, password) = &people["demo-admin"];
    assert_eq!(url, &format!("{}/login", server.address));
    let admin = Client::anonymous(&server.address);
    assert_eq!(admin.login("demo-admin", password).await.status(), 200);

    let tools = json_of(&admin, "/v1/tools").await;
    let effects: BTreeSet<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["effect"].as_str().unwrap())
        .collect();
    assert_eq!(
        effects,
        BTreeSet::from([
            "irreversible",
            "idempotent_write",
            "non_idempotent_write",
            "read_only"
        ])
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Seen::now(&admin).await;
    while !seen.has_everything() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        seen = Seen::now(&admin).await;
    }
    for status in ["succeeded", "failed", "awaiting_approval"] {
        assert!(seen.statuses.contains(status), "no {status} in {seen:?}");
    }
    for counter in [
        "duplicates_prevented",
        "in_flight_rejected",
        "mismatches_rejected",
        "reconciliations",
    ] {
        assert!(seen.count(counter) > 0, "{counter} is 0 in {seen:?}");
    }
    assert!(
        seen.count("awaiting_approval") <= 5,
        "the approval queue stays short: {seen:?}"
    );
    let surprises: Vec<String> = server
        .drain_log()
        .into_iter()
        .filter(|line| line.contains("demo agent: unexpected answer"))
        .collect();
    assert!(
        surprises.is_empty(),
        "every answer was the expected one: {surprises:?}"
    );
}

async fn without_the_demo_flag_no_tools_and_no_operations_are_made_up(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let agent = server.agent(&cli_key(database.url(), "demo"));
    tokio::time::sleep(Duration::from_millis(500)).await;

    let tools = json_of(&agent, "/v1/tools").await;
    assert_eq!(tools["tools"], serde_json::json!([]));
    let operations = json_of(&agent, "/v1/operations").await;
    assert_eq!(operations["operations"], serde_json::json!([]));
    let printed = server.stdout_line(Duration::from_millis(100));
    assert!(
        printed
            .as_ref()
            .is_none_or(|line| !line.starts_with("demo:")),
        "{printed:?}"
    );
}

async fn a_restarted_demo_gives_its_people_new_passwords_and_its_agent_a_new_key(db: Db) {
    let database = TestDatabase::create(db).await;
    let first = ServerProcess::start_with(database.url(), &["--demo"], &BRISK);
    let (_, old_password) = sign_in_lines(&first).remove("demo-admin").unwrap();
    let (clean, log) = tokio::task::spawn_blocking(move || first.terminate())
        .await
        .unwrap();
    assert!(clean, "the demo stops with the server: {log:?}");

    let second = ServerProcess::start_with(database.url(), &["--demo"], &BRISK);
    let (_, new_password) = sign_in_lines(&second).remove("demo-admin").unwrap();
    let admin = Client::anonymous(&second.address);
    assert_eq!(admin.login("demo-admin", &old_password).await.status(), 401);
    assert_eq!(admin.login("demo-admin", &new_password).await.status(), 200);

    let audit = json_of(&admin, "/v1/audit?limit=200").await;
    let by_system = |action: &str| {
        audit["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["actor"] == "system" && event["action"] == action)
            .map(|event| event["subject"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert!(by_system("user.created").contains(&"user:demo-admin".to_owned()));
    assert!(by_system("user.password_changed").contains(&"user:demo-admin".to_owned()));
    assert_eq!(by_system("api_key.created").len(), 2, "one key per start");
    assert_eq!(
        by_system("api_key.revoked").len(),
        1,
        "the first start's key"
    );
    let keys = json_of(&admin, "/v1/keys").await;
    let live_demo_keys = keys["api_keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|key| key["namespace"] == "demo" && key["revoked_at"].is_null())
        .count();
    assert_eq!(live_demo_keys, 1);
}
