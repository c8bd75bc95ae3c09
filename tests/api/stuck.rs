//! Stuck unknowns over time: `/v1/metrics` charts them from the ledger with the threshold
//! `IDEM_STUCK_AFTER`, and reads the same from a fresh store, from a new server process after
//! a restart, and in the Prometheus gauge.

use app::domain::Role;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};
use std::process::Command;

use crate::helpers::{Client, Db, TestApp};
use crate::metrics::{execute_on, last_updated_minutes_ago, refund};
use crate::on_both_databases;
use crate::processes::{cli_key, cli_operator, ServerProcess};
use idem::storage::testing::TestDatabase;

on_both_databases!(
    stuck_unknowns_are_charted_from_the_ledger_with_the_configured_threshold,
    a_restarted_server_draws_the_same_stuck_series_with_the_threshold_it_is_given,
);

/// When an operation became `unknown`, and when (if) it was settled.
type Span = (DateTime<Utc>, Option<DateTime<Utc>>);

const WINDOWS: [&str; 3] = ["1h", "24h", "7d"];

/// Time travel for a settlement: the operation's `resolved` event happened `minutes` ago.
async fn resolved_minutes_ago(database_url: &str, db: Db, id: &str, minutes: i64) -> DateTime<Utc> {
    let at: DateTime<Utc> = Utc::now() - TimeDelta::minutes(minutes);
    let sql = "update operation_events set at = $1 where operation_id = $2 and kind = 'resolved'";
    assert_eq!(execute_on(database_url, db, sql, at, id).await, 1);
    at
}

/// Four operations of `shop` that became `unknown`: s-1 50 minutes ago, s-2 12, s-3 5, and
/// s-4 was unknown from 40 to 20 minutes ago, when `operator` resolved it. Answers their spans.
async fn four_unknowns(database_url: &str, db: Db, shop: &Client, operator: &Client) -> Vec<Span> {
    let mut unknown = Vec::new();
    for order in ["s-1", "s-2", "s-3", "s-4"] {
        let (id, token, _) = shop.start(&refund(order, 100)).await;
        let marked = shop
            .mark_unknown(&id, &json!({ "lease_token": token }))
            .await;
        assert_eq!(marked.status(), 200);
        unknown.push(id);
    }
    let mut spans = Vec::new();
    for (id, minutes) in unknown.iter().zip([50, 12, 5, 40]) {
        spans.push((
            last_updated_minutes_ago(database_url, db, id, minutes).await,
            None,
        ));
    }
    let resolution = json!({ "outcome": "succeeded", "reason": "found in the provider's log" });
    assert_eq!(
        operator.resolve(&unknown[3], &resolution).await.status(),
        200
    );
    spans[3].1 = Some(resolved_minutes_ago(database_url, db, &unknown[3], 20).await);
    spans
}

/// The stuck unknowns of each bucket as the contract defines them: operations `unknown` at
/// the bucket's last moment (its end, or now) for longer than the threshold, given when each
/// became unknown and when (if) it was settled.
fn stuck_per_bucket(report: &Value, spans: &[Span], threshold: TimeDelta) -> Vec<u64> {
    let time = |text: &Value| {
        DateTime::parse_from_rfc3339(text.as_str().unwrap())
            .unwrap()
            .to_utc()
    };
    let series = report["series"].as_array().unwrap();
    let starts: Vec<DateTime<Utc>> = series.iter().map(|b| time(&b["bucket_start"])).collect();
    let now = Utc::now();
    (0..starts.len())
        .map(|i| {
            let end = starts
                .get(i + 1)
                .copied()
                .unwrap_or(time(&report["to"]))
                .min(now);
            spans
                .iter()
                .filter(|(since, until)| {
                    end - *since > threshold && until.is_none_or(|until| until > end)
                })
                .count() as u64
        })
        .collect()
}

/// The series' `stuck_unknown`, oldest bucket first.
fn stuck_of(report: &Value) -> Vec<u64> {
    report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["stuck_unknown"].as_u64().unwrap())
        .collect()
}

/// The Prometheus gauge `idem_stuck_unknown_operations` of the server at `address`, with the
/// threshold its help text gives.
async fn stuck_gauge(address: &str) -> (u64, String) {
    let text = reqwest::get(format!("{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gauge = "idem_stuck_unknown_operations";
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{gauge} ")))
        .unwrap_or_else(|| panic!("no {gauge} in {text}"));
    let help = text
        .lines()
        .find_map(|line| line.strip_prefix(&format!("# HELP {gauge} ")))
        .unwrap_or_else(|| panic!("no help for {gauge} in {text}"));
    (value.parse().unwrap(), help.to_owned())
}

async fn stuck_unknowns_are_charted_from_the_ledger_with_the_configured_threshold(db: Db) {
    let threshold = TimeDelta::minutes(10);
    let app = TestApp::spawn_with(db, |config| config.stuck_after = threshold).await;
    let shop = app.agent("shop").await;
    let operator = app.person(Role::Operator).await;
    let spans = four_unknowns(app.database.url(), db, &shop, &operator).await;

    let viewer = app.person(Role::Viewer).await;
    let report = viewer.metrics_body("?window=1h").await;
    assert_eq!(report["stuck_after_seconds"], 600);
    assert_eq!(report["unknown_now"], 3);
    assert_eq!(report["stuck_unknown"], 2, "s-1 and s-2, not s-3 yet");
    let stuck = stuck_of(&report);
    assert_eq!(stuck, stuck_per_bucket(&report, &spans, threshold));
    assert_eq!(stuck.last(), Some(&2), "the newest bucket is now");
    assert!(
        stuck.contains(&2) && stuck.contains(&1) && stuck[0] <= 1,
        "{stuck:?}"
    );

    // A fresh store knows only the database: the same series, in every window.
    let fresh = idem::storage::Database::open(app.database.url())
        .await
        .unwrap();
    let metrics =
        app::ledger::metrics::Metrics::new(fresh.metrics_store()).with_stuck_after(threshold);
    for window in WINDOWS {
        let served = viewer.metrics_body(&format!("?window={window}")).await;
        let read = serde_json::to_value(metrics.read(None, Some(window)).await.unwrap()).unwrap();
        assert_eq!(stuck_of(&served), stuck_of(&read), "{window}");
        assert_eq!(
            stuck_of(&served),
            stuck_per_bucket(&served, &spans, threshold),
            "{window}"
        );
        assert_eq!(stuck_of(&served).last(), Some(&2), "{window}");
    }
    fresh.close().await;

    // The Prometheus gauge uses the same threshold, and says which.
    let (gauge, help) = stuck_gauge(&app.address).await;
    assert_eq!(gauge, 2);
    assert!(help.contains("10 minutes"), "{help}");
}

async fn a_restarted_server_draws_the_same_stuck_series_with_the_threshold_it_is_given(db: Db) {
    let database = TestDatabase::create(db).await;
    let url = database.url();
    let ten = TimeDelta::minutes(10);
    let key = cli_key(url, "shop");
    let server = ServerProcess::start_with_env(url, &[("IDEM_STUCK_AFTER", "10m")]);
    let shop = server.agent(&key);
    let spans = four_unknowns(url, db, &shop, &cli_operator(&server, url).await).await;
    let mut before = Vec::new();
    for window in WINDOWS {
        before.push(shop.metrics_body(&format!("?window={window}")).await);
    }
    let (stopped, _) = server.terminate();
    assert!(stopped);

    // A new `idem serve` process on the same database, told the same threshold by its
    // environment: nothing of the series lived in the first one's memory.
    let server = ServerProcess::start_with_env(url, &[("IDEM_STUCK_AFTER", "10m")]);
    let shop = server.agent(&key);
    for (window, before) in WINDOWS.iter().zip(&before) {
        let after = shop.metrics_body(&format!("?window={window}")).await;
        assert_eq!(after["stuck_after_seconds"], 600, "{window}");
        assert_eq!(after["stuck_unknown"], 2, "{window}");
        let stuck = stuck_of(&after);
        assert_eq!(stuck, stuck_per_bucket(&after, &spans, ten), "{window}");
        assert_eq!(stuck.last(), Some(&2), "{window}: the newest bucket is now");
        // The same buckets (no minute went by between the two reads) read the same.
        if after["from"] == before["from"] {
            assert_eq!(stuck, stuck_of(before), "{window}");
        }
    }
    assert_eq!(stuck_gauge(&server.address).await.0, 2);
    assert!(server.terminate().0);

    // Told 45 minutes: only s-1 (unknown for 50) is stuck, for 5 minutes; s-4 (unknown for 20
    // minutes) never was.
    let forty_five = TimeDelta::minutes(45);
    let server = ServerProcess::start_with_env(url, &[("IDEM_STUCK_AFTER", "45m")]);
    let shop = server.agent(&key);
    for window in WINDOWS {
        let report = shop.metrics_body(&format!("?window={window}")).await;
        assert_eq!(report["stuck_after_seconds"], 2700, "{window}");
        assert_eq!(report["stuck_unknown"], 1, "{window}");
        let stuck = stuck_of(&report);
        assert_eq!(stuck, stuck_per_bucket(&report, &spans, forty_five));
        assert_eq!(stuck.iter().max(), Some(&1), "{window}: {stuck:?}");
    }
    let (gauge, help) = stuck_gauge(&server.address).await;
    assert_eq!(gauge, 1);
    assert!(help.contains("45 minutes"), "{help}");
}

#[test]
fn idem_serve_refuses_a_stuck_threshold_that_is_not_a_duration() {
    for refused in ["15", "0m", "8d", "1.5h"] {
        let output = Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .env("IDEM_DATABASE_URL", "sqlite://never-opened.db")
            .env("IDEM_STUCK_AFTER", refused)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{refused}: {output:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.contains("--stuck-after") && said.contains("not a duration such as 90s, 15m"),
            "{refused}: {said}"
        );
    }
}
