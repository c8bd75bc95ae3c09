//! `GET /v1/metrics` counts exactly what the events say, per namespace and bucket; `GET
//! /metrics` serves Prometheus text whose counters moved by exactly what the test did.

use app::domain::Role;
use app::ledger::{Event, EventKind};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

use crate::faults::{sandbox_rig, wait_for_status};
use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    metrics_count_a_known_mix_exactly_in_totals_and_series,
    agents_see_only_their_namespace_and_people_may_filter,
    a_bad_window_is_400_invalid_window,
    prometheus_counters_move_by_exactly_what_was_done,
    a_reconciliation_is_counted_with_its_latency,
);

impl Client {
    pub async fn metrics(&self, query: &str) -> reqwest::Response {
        self.get(&format!("/v1/metrics{query}")).await
    }

    pub(crate) async fn metrics_body(&self, query: &str) -> Value {
        let response = self.metrics(query).await;
        assert_eq!(response.status(), 200, "GET /v1/metrics{query}");
        response.json().await.unwrap()
    }

    async fn status_of_claim(&self, body: &Value) -> u16 {
        self.claim(body).await.status().as_u16()
    }

    /// Claims and completes with success; returns the operation's id.
    async fn succeed(&self, body: &Value) -> String {
        let (id, token, _) = self.start(body).await;
        let completed = self
            .complete(
                &id,
                &json!({ "lease_token": token, "outcome": "succeeded" }),
            )
            .await;
        assert_eq!(completed.status(), 200);
        id
    }
}

pub(crate) fn refund(order: &str, amount: u64) -> Value {
    json!({ "tool": "refund", "key": format!("refund:{order}"), "args": { "order_id": order, "amount_cents": amount } })
}

fn wire(key: &str) -> Value {
    json!({ "tool": "wire", "key": key, "args": { "amount_cents": 100 } })
}

/// The operations of the mix, by what became of them.
pub(crate) struct Mix {
    pub(crate) unknown_old: String,
    pub(crate) unknown_new: String,
}

/// Drives a known mix over HTTP for the agent of `shop`, and one replay for `other`:
/// replays 2 + 1, in-flight 1, blocked unknown 1, blocked awaiting approval 1, mismatch 1;
/// an operator resolves one `unknown` operation of `shop` and expires its completed one;
/// two operations stay `unknown`, one `awaiting_approval`.
pub(crate) async fn drive_mix(app: &TestApp, shop: &Client, other: &Client) -> Mix {
    let admin = app.person(Role::Admin).await;
    let irreversible = admin
        .put_tool("wire", &json!({ "effect": "irreversible" }))
        .await;
    assert_eq!(irreversible.status(), 200);

    let done = shop.succeed(&refund("1", 500)).await;
    assert_eq!(shop.status_of_claim(&refund("1", 500)).await, 200, "replay");
    assert_eq!(shop.status_of_claim(&refund("1", 500)).await, 200, "replay");
    assert_eq!(
        shop.status_of_claim(&refund("1", 999)).await,
        422,
        "mismatch"
    );

    shop.start(&refund("2", 500)).await;
    assert_eq!(
        shop.status_of_claim(&refund("2", 500)).await,
        409,
        "in flight"
    );

    let mut unknown = Vec::new();
    for order in ["3", "4", "5"] {
        let (id, token, _) = shop.start(&refund(order, 500)).await;
        let marked = shop
            .mark_unknown(&id, &json!({ "lease_token": token }))
            .await;
        assert_eq!(marked.status(), 200);
        unknown.push(id);
    }
    assert_eq!(
        shop.status_of_claim(&refund("3", 500)).await,
        409,
        "blocked unknown"
    );

    assert_eq!(
        shop.status_of_claim(&wire("w-1")).await,
        202,
        "approval requested"
    );
    assert_eq!(
        shop.status_of_claim(&wire("w-1")).await,
        202,
        "blocked awaiting"
    );

    other.succeed(&refund("1", 500)).await;
    assert_eq!(
        other.status_of_claim(&refund("1", 500)).await,
        200,
        "their replay"
    );

    let operator = app.person(Role::Operator).await;
    let settled_by_hand = unknown.pop().unwrap();
    let resolution = json!({ "outcome": "succeeded", "reason": "the provider's log shows it" });
    let resolved = operator.resolve(&settled_by_hand, &resolution).await;
    assert_eq!(resolved.status(), 200);
    let expired = operator
        .expire(
            &done,
            &json!({ "reason": "the customer wants a second refund" }),
        )
        .await;
    assert_eq!(expired.status(), 200);

    let unknown_new = unknown.pop().unwrap();
    let unknown_old = unknown.pop().unwrap();
    Mix {
        unknown_old,
        unknown_new,
    }
}

fn event(operation: &str, kind: EventKind, actor: &str, detail: Value) -> Event {
    Event {
        operation_id: Uuid::parse_str(operation).unwrap(),
        at: Utc::now(),
        kind,
        actor: actor.into(),
        detail,
    }
}

/// Written as events, so the percentiles have known values (1.2 s and 0.3 s) and the mix
/// needs no provider: a found and a not-found reconciliation and a failed lookup. The real
/// path (sandbox provider, background reconciler) is `a_reconciliation_is_counted_with_its_latency`.
pub(crate) async fn append_reconciliations(app: &TestApp, mix: &Mix) {
    let events = [
        event(
            &mix.unknown_old,
            EventKind::Reconciled,
            "system",
            json!({ "found": true, "status": "succeeded", "provider_ref": "re_1", "unknown_for_ms": 1200 }),
        ),
        event(
            &mix.unknown_new,
            EventKind::Reconciled,
            "system",
            json!({ "found": false, "status": "failed", "provider_ref": null, "unknown_for_ms": 300 }),
        ),
        event(
            &mix.unknown_new,
            EventKind::ReconcileAttempted,
            "system",
            json!({ "error": "timeout" }),
        ),
    ];
    app.state
        .database
        .ledger_store()
        .record_quiet_events(events.to_vec());
}

/// Time travel for "stuck": the operation became `unknown` `minutes` ago (its `updated_at`,
/// `unknown_since` and the event that made it so move; nothing else does).
pub(crate) async fn last_updated_minutes_ago(
    database_url: &str,
    db: Db,
    id: &str,
    minutes: i64,
) -> DateTime<Utc> {
    let at: DateTime<Utc> = Utc::now() - TimeDelta::minutes(minutes);
    let changed = execute_on(
        database_url,
        db,
        "update operations set updated_at = $1, unknown_since = $1 where id = $2",
        at,
        id,
    )
    .await;
    assert_eq!(changed, 1);
    execute_on(
        database_url,
        db,
        "update operation_events set at = $1 where operation_id = $2 and kind = 'marked_unknown'",
        at,
        id,
    )
    .await;
    at
}

/// Runs `sql` with `$1` the time and `$2` the operation's id on the database, beside the
/// server; answers how many rows it changed.
pub(crate) async fn execute_on(
    database_url: &str,
    db: Db,
    sql: &str,
    at: DateTime<Utc>,
    id: &str,
) -> u64 {
    let id = Uuid::parse_str(id).unwrap();
    match db {
        Db::Sqlite => {
            let pool = sqlx::SqlitePool::connect(database_url).await.unwrap();
            let done = sqlx::query(sql).bind(at).bind(id).execute(&pool).await;
            pool.close().await;
            done.unwrap().rows_affected()
        }
        Db::Postgres => {
            let pool = sqlx::PgPool::connect(database_url).await.unwrap();
            let done = sqlx::query(sql).bind(at).bind(id).execute(&pool).await;
            pool.close().await;
            done.unwrap().rows_affected()
        }
    }
}

const COUNTERS: [&str; 5] = [
    "duplicates_prevented",
    "in_flight_rejected",
    "mismatches_rejected",
    "manual_interventions",
    "reconciliations",
];

/// Asserts the window's counters and gauges, and that the series sums to the counters.
fn assert_counts(report: &Value, expected: &[(&str, u64)], buckets: usize) {
    for (field, value) in expected {
        assert_eq!(report[*field], json!(value), "{field} in {report}");
    }
    let series = report["series"].as_array().expect("a series");
    assert_eq!(series.len(), buckets, "every bucket is present");
    let starts: Vec<&str> = series
        .iter()
        .map(|b| b["bucket_start"].as_str().unwrap())
        .collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted, "oldest first");
    for counter in COUNTERS {
        let sum: u64 = series.iter().map(|b| b[counter].as_u64().unwrap()).sum();
        assert_eq!(json!(sum), report[counter], "the series sums to {counter}");
    }
}

async fn metrics_count_a_known_mix_exactly_in_totals_and_series(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let other = app.agent("other").await;
    let mix = drive_mix(&app, &shop, &other).await;
    append_reconciliations(&app, &mix).await;
    last_updated_minutes_ago(app.database.url(), db, &mix.unknown_old, 20).await;
    let viewer = app.person(Role::Viewer).await;

    let everyone = viewer.metrics_body("").await;
    assert_counts(
        &everyone,
        &[
            ("duplicates_prevented", 6),
            ("in_flight_rejected", 1),
            ("mismatches_rejected", 1),
            ("manual_interventions", 2),
            ("reconciliations", 2),
            ("unknown_now", 2),
            ("stuck_unknown", 1),
            ("awaiting_approval", 1),
        ],
        24,
    );
    assert_eq!(everyone["window"], "24h");
    assert_eq!(everyone["bucket_seconds"], 3600);
    assert_eq!(
        everyone["reconciliation_latency_ms"],
        json!({ "p50": 300, "p95": 1200, "max": 1200 })
    );
    let newest = &everyone["series"][23];
    assert_eq!(
        newest["duplicates_prevented"], 6,
        "everything happened just now"
    );
    assert_eq!(newest["reconciliation_latency_ms"]["max"], 1200);
    assert_eq!(
        everyone["series"][0]["reconciliation_latency_ms"]["p50"],
        Value::Null
    );

    let last_hour = viewer.metrics_body("?window=1h").await;
    assert_counts(
        &last_hour,
        &[
            ("duplicates_prevented", 6),
            ("manual_interventions", 2),
            ("unknown_now", 2),
        ],
        12,
    );
    assert_eq!(last_hour["bucket_seconds"], 300);
    let week = viewer.metrics_body("?window=7d").await;
    assert_counts(
        &week,
        &[("duplicates_prevented", 6), ("mismatches_rejected", 1)],
        28,
    );
}

async fn agents_see_only_their_namespace_and_people_may_filter(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let other = app.agent("other").await;
    let mix = drive_mix(&app, &shop, &other).await;
    append_reconciliations(&app, &mix).await;

    let shop_view = [
        ("duplicates_prevented", 5),
        ("in_flight_rejected", 1),
        ("mismatches_rejected", 1),
        ("manual_interventions", 2),
        ("reconciliations", 2),
        ("unknown_now", 2),
        ("stuck_unknown", 0),
        ("awaiting_approval", 1),
    ];
    let other_view = [
        ("duplicates_prevented", 1),
        ("in_flight_rejected", 0),
        ("mismatches_rejected", 0),
        ("manual_interventions", 0),
        ("reconciliations", 0),
        ("unknown_now", 0),
        ("stuck_unknown", 0),
        ("awaiting_approval", 0),
    ];
    assert_counts(&shop.metrics_body("").await, &shop_view, 24);
    assert_counts(&shop.metrics_body("?namespace=shop").await, &shop_view, 24);
    assert_counts(&other.metrics_body("").await, &other_view, 24);

    // Another namespace is, for an agent, one where nothing ever happened.
    let nothing = shop.metrics_body("?namespace=other").await;
    let zeros: Vec<(&str, u64)> = shop_view.iter().map(|(field, _)| (*field, 0)).collect();
    assert_counts(&nothing, &zeros, 24);
    assert_eq!(
        nothing["reconciliation_latency_ms"],
        json!({ "p50": null, "p95": null, "max": null })
    );

    let operator = app.person(Role::Operator).await;
    assert_counts(
        &operator.metrics_body("?namespace=shop").await,
        &shop_view,
        24,
    );
    assert_counts(
        &operator.metrics_body("?namespace=other").await,
        &other_view,
        24,
    );
    let bad = operator.metrics("?namespace=not%20a%20namespace").await;
    assert_error(bad, 400, "invalid_namespace").await;
    assert_error(app.anonymous().metrics("").await, 401, "unauthorized").await;
}

async fn a_bad_window_is_400_invalid_window(db: Db) {
    let app = TestApp::spawn(db).await;
    let viewer = app.person(Role::Viewer).await;
    let agent = app.agent("shop").await;
    for window in [
        "",
        "0h",
        "31d",
        "721h",
        "24",
        "1w",
        "-1h",
        "1.5h",
        "24H",
        "abc",
        "99999999999999999999d",
    ] {
        let body = assert_error(
            viewer.metrics(&format!("?window={window}")).await,
            400,
            "invalid_window",
        )
        .await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("30 days"),
            "{body}"
        );
        assert_error(
            agent.metrics(&format!("?window={window}")).await,
            400,
            "invalid_window",
        )
        .await;
    }
    for (window, buckets) in [
        ("1h", 12),
        ("24h", 24),
        ("7d", 28),
        ("30d", 120),
        ("90m", 18),
        ("1m", 1),
    ] {
        let report = viewer.metrics_body(&format!("?window={window}")).await;
        assert_eq!(
            report["series"].as_array().unwrap().len(),
            buckets,
            "{window}"
        );
        assert_eq!(report["window"], window);
    }
}

/// Parses Prometheus text exposition: `# HELP`/`# TYPE` comments and `name{labels} value`
/// samples. Panics on any other line, so a malformed exposition fails the test.
fn parse_prometheus(text: &str) -> BTreeMap<String, f64> {
    let mut samples = BTreeMap::new();
    let mut typed = Vec::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            let (kind, name) = (words.next().unwrap(), words.next().unwrap());
            assert!(["HELP", "TYPE"].contains(&kind), "comment {line:?}");
            if kind == "TYPE" {
                let family_type = words.next().unwrap();
                assert!(
                    ["counter", "histogram", "gauge"].contains(&family_type),
                    "{line:?}"
                );
                typed.push(name.to_owned());
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("sample {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name in {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
            assert!(
                labels.starts_with('{') && labels.ends_with('}'),
                "labels in {line:?}"
            );
        }
        assert!(
            typed.iter().any(|family| name.starts_with(family.as_str())),
            "{name} has no TYPE"
        );
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value in {line:?}"));
        samples.insert(series.to_owned(), value);
    }
    samples
}

async fn scrape(app: &TestApp) -> BTreeMap<String, f64> {
    let response = app.anonymous().get("/metrics").await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    parse_prometheus(&response.text().await.unwrap())
}

async fn prometheus_counters_move_by_exactly_what_was_done(db: Db) {
    let app = TestApp::spawn(db).await;
    let before = scrape(&app).await;
    let claims = |outcome: &str| format!("idem_claims_total{{outcome=\"{outcome}\"}}");
    let manual = |kind: &str| format!("idem_manual_interventions_total{{kind=\"{kind}\"}}");
    for outcome in [
        "started",
        "replayed",
        "in_progress",
        "outcome_unknown",
        "awaiting_approval",
        "key_reused",
        "invalid",
    ] {
        assert_eq!(
            before.get(&claims(outcome)),
            Some(&0.0),
            "{outcome} starts at 0"
        );
    }

    let shop = app.agent("shop").await;
    let other = app.agent("other").await;
    drive_mix(&app, &shop, &other).await;
    let invalid = shop
        .claim(&json!({ "tool": "bad tool!", "key": "k", "args": {} }))
        .await;
    assert_error(invalid, 400, "invalid_tool_name").await;

    let after = scrape(&app).await;
    let expected = [
        // refund 1 to 5 of shop and refund 1 of other.
        (claims("started"), 6.0),
        (claims("replayed"), 3.0),
        (claims("in_progress"), 1.0),
        (claims("outcome_unknown"), 1.0),
        (claims("awaiting_approval"), 2.0),
        (claims("key_reused"), 1.0),
        (claims("invalid"), 1.0),
        ("idem_replays_total".into(), 3.0),
        ("idem_in_flight_rejections_total".into(), 1.0),
        ("idem_mismatches_total".into(), 1.0),
        ("idem_marked_unknown_total".into(), 3.0),
        ("idem_claim_duration_seconds_count".into(), 15.0),
        ("idem_reconciliations_total{result=\"found\"}".into(), 0.0),
        // The operator's resolve and expire went through the ledger; the reconciliations
        // of this test were written as events (see `append_reconciliations`) and are not here.
        (manual("resolve"), 1.0),
        (manual("expire"), 1.0),
        ("idem_reconciliation_latency_seconds_count".into(), 0.0),
    ];
    for (series, value) in expected {
        assert_eq!(after.get(&series), Some(&value), "{series}");
    }
}

/// A real reconciliation (the sandbox commits, the call times out, the background reconciler
/// finds the effect) shows in both: the ledger's window and the process counters.
async fn a_reconciliation_is_counted_with_its_latency(db: Db) {
    let (provider, app, agent) = sandbox_rig(db, "charge", 300, "shop").await;
    provider
        .fault(json!({ "fault": "delay_after_commit", "delay_ms": 1500 }))
        .await;
    let body = json!({ "key": "charge:1", "args": { "order_id": 1, "amount_cents": 500 } });
    let invoked: Value = agent.invoke("charge", &body).await.json().await.unwrap();
    assert_eq!(invoked["operation"]["status"], "unknown", "{invoked}");
    let id = invoked["operation"]["id"].as_str().unwrap().to_owned();
    wait_for_status(&agent, &id, "succeeded").await;

    let events: Value = agent.events(&id).await.json().await.unwrap();
    let latencies: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "reconciled")
        .map(|e| e["detail"]["unknown_for_ms"].as_u64().unwrap())
        .collect();
    let [latency] = latencies[..] else {
        panic!("one reconciliation: {events}")
    };
    let report = agent.metrics_body("?window=1h").await;
    assert_counts(
        &report,
        &[
            ("reconciliations", 1),
            ("unknown_now", 0),
            ("duplicates_prevented", 0),
        ],
        12,
    );
    assert_eq!(
        report["reconciliation_latency_ms"],
        json!({ "p50": latency, "p95": latency, "max": latency })
    );

    let scraped = scrape(&app).await;
    assert_eq!(
        scraped.get("idem_reconciliations_total{result=\"found\"}"),
        Some(&1.0)
    );
    assert_eq!(scraped.get("idem_marked_unknown_total"), Some(&1.0));
    let observed = scraped.get("idem_reconciliation_latency_seconds_count");
    assert_eq!(observed, Some(&1.0));
    let sum = scraped["idem_reconciliation_latency_seconds_sum"];
    assert!(
        (sum - latency as f64 / 1000.0).abs() < 0.001,
        "{sum} s vs {latency} ms"
    );
}
