//! Metrics: the per-minute roll-up changes no answer, folds each minute once, and keeps
//! namespaces apart.

use app::domain::Namespace;
use app::ledger::metrics::{MetricsReport, MetricsWindow, ToolsReport, DEFAULT_STUCK_AFTER};
use app::ledger::{Event, EventKind, Report};
use chrono::{TimeDelta, Utc};
use serde_json::json;
use uuid::Uuid;

use super::approvals::sqlite_plan;
use super::conformance;
use super::ledger::{fresh, request, start};
use super::retention::sql_at;
use crate::storage::metrics_sql::{GAUGES, TOOL_GAUGES};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::unknown_spans_sql::SPANS;
use crate::storage::Database;

conformance!(
    run;
    folding_past_minutes_changes_no_answer_and_folds_each_minute_once,
    the_table_by_tool_folds_operations_failures_and_duplicates,
);

pub(super) async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Backend, TestDatabase, Database) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url())
        .await
        .expect("open the test database");
    check(backend, db, database.clone()).await;
    database.close().await;
}

/// Runs a statement without parameters, and returns the first column of its first row if
/// it has one; the statements here are the same text on both databases.
pub(super) async fn sql(backend: Backend, db: &TestDatabase, statement: &str) -> Option<i64> {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
            let row: Option<(i64,)> = sqlx::query_as(statement)
                .fetch_optional(&pool)
                .await
                .unwrap();
            pool.close().await;
            row.map(|(value,)| value)
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
            let row: Option<(i64,)> = sqlx::query_as(statement)
                .fetch_optional(&pool)
                .await
                .unwrap();
            pool.close().await;
            row.map(|(value,)| value)
        }
    }
}

fn event(operation: Uuid, minutes_ago: i64, kind: EventKind, detail: serde_json::Value) -> Event {
    Event {
        operation_id: operation,
        at: Utc::now() - TimeDelta::minutes(minutes_ago),
        kind,
        actor: "system".into(),
        detail,
    }
}

/// The counters of every bucket, oldest first.
fn series_counts(report: &MetricsReport) -> Vec<(u64, u64, u64, u64)> {
    report
        .series
        .iter()
        .map(|b| {
            let c = &b.counters;
            (
                c.duplicates_prevented,
                c.mismatches_rejected,
                c.manual_interventions,
                c.reconciliations,
            )
        })
        .collect()
}

async fn folding_past_minutes_changes_no_answer_and_folds_each_minute_once(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let (ledger, metrics) = (database.ledger_store(), database.metrics_store());
    let (billing_op, _) = start(ledger.as_ref(), &request("billing", "order-1", "refund")).await;
    let (support_op, _) = start(ledger.as_ref(), &request("support", "order-2", "refund")).await;
    // As if the roll-up had last run 90 minutes ago, so the events below are all its to fold.
    sql(
        backend,
        &db,
        "update metrics_rollup set rolled_until = rolled_until - 90",
    )
    .await;
    let (billing, support) = (billing_op.id, support_op.id);
    ledger.record_quiet_events(vec![
        event(billing, 80, EventKind::Replayed, json!({})),
        event(billing, 30, EventKind::Replayed, json!({})),
        event(billing, 30, EventKind::InFlightRejected, json!({})),
        event(billing, 30, EventKind::Completed, json!({})),
        event(billing, 5, EventKind::MismatchRejected, json!({})),
        event(billing, 0, EventKind::Resolved, json!({})),
        event(support, 45, EventKind::BlockedUnknown, json!({})),
        event(
            support,
            20,
            EventKind::Reconciled,
            json!({ "found": true, "unknown_for_ms": 700 }),
        ),
    ]);
    let day = MetricsWindow::default();
    let support_ns = Namespace::try_from("support").unwrap();
    let before = metrics
        .metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let support_before = metrics
        .metrics(Some(&support_ns), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let tools_before = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();

    // Two rounds at once (two processes): each minute is folded by one of them.
    let (one, two) = tokio::join!(metrics.roll_up(), metrics.roll_up());
    let (one, two) = (one.unwrap(), two.unwrap());
    assert_eq!(one.max(two), 60, "an hour per round at most");
    let mut total = one + two;
    loop {
        let folded = metrics.roll_up().await.unwrap();
        if folded == 0 {
            break;
        }
        total += folded;
    }
    assert!((88..=90).contains(&total), "up to two minutes ago: {total}");
    let rows = sql(backend, &db, "select count(*) from event_minutes").await;
    assert_eq!(
        rows,
        Some(5),
        "replayed ×2 minutes, in flight, blocked unknown, mismatch"
    );
    let rows = sql(backend, &db, "select count(*) from tool_minutes").await;
    assert_eq!(
        rows,
        Some(3),
        "billing's duplicates of two minutes, support's of one; the claims are too recent"
    );
    let tools_after = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(tools_before.tools, tools_after.tools);
    let duplicates: Vec<(&str, u64)> = tools_after
        .tools
        .iter()
        .map(|row| (row.namespace.as_str(), row.duplicates_prevented))
        .collect();
    assert_eq!(duplicates, [("billing", 3), ("support", 1)]);

    let after = metrics
        .metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let support_after = metrics
        .metrics(Some(&support_ns), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    for (before, after) in [(&before, &after), (&support_before, &support_after)] {
        assert_eq!(before.totals, after.totals);
        if before.to == after.to {
            assert_eq!(series_counts(before), series_counts(after));
        }
    }
    let totals = &after.totals;
    assert_eq!(
        (
            totals.duplicates_prevented,
            totals.in_flight_rejected,
            totals.mismatches_rejected
        ),
        (4, 1, 1)
    );
    assert_eq!(
        (totals.manual_interventions, totals.reconciliations),
        (1, 1)
    );
    assert_eq!(totals.reconciliation_latency_ms.p50, Some(700));
    let support_totals = &support_after.totals;
    assert_eq!(
        (
            support_totals.duplicates_prevented,
            support_totals.mismatches_rejected
        ),
        (1, 0)
    );
    assert_eq!(support_totals.reconciliations, 1);
    let last_hour = metrics
        .metrics(
            None,
            &MetricsWindow::try_from("1h").unwrap(),
            DEFAULT_STUCK_AFTER,
        )
        .await
        .unwrap();
    assert_eq!(
        last_hour.totals.duplicates_prevented, 3,
        "the replay of 80 minutes ago is out"
    );
}

/// The table by tool, unfolded and folded: (namespace, tool, operations, failures,
/// duplicates) of each row.
fn tool_rows(report: &ToolsReport) -> Vec<(&str, &str, u64, u64, u64)> {
    report
        .tools
        .iter()
        .map(|row| {
            let (namespace, tool) = (row.namespace.as_str(), row.tool.as_str());
            (
                namespace,
                tool,
                row.operations,
                row.failures,
                row.duplicates_prevented,
            )
        })
        .collect()
}

async fn the_table_by_tool_folds_operations_failures_and_duplicates(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let (ledger, metrics) = (database.ledger_store(), database.metrics_store());
    let failing = request("billing", "order-1", "refund");
    let (failed, token) = start(ledger.as_ref(), &failing).await;
    let declined = Report::Completed {
        succeeded: false,
        result: None,
        error: Some(json!({ "code": "card_declined" })),
        retryable: false,
        provider_ref: None,
    };
    let billing = failing.namespace.clone();
    let report = ledger.report(&billing, failed.id, &token, &declined, "a");
    report.await.unwrap().unwrap().outcome.unwrap();
    let running = request("billing", "order-2", "refund");
    start(ledger.as_ref(), &running).await;
    let in_flight = ledger.claim(&running, "a", fresh()).await.unwrap();
    ledger.record_quiet_events(in_flight.events);
    let emailed = request("support", "welcome-3", "email.send");
    start(ledger.as_ref(), &emailed).await;
    let replay = ledger.claim(&failing, "a", fresh()).await.unwrap();
    ledger.record_quiet_events(replay.events);
    let day = MetricsWindow::default();
    // Flushes the quiet events; then everything moves half an hour back, each operation's
    // times and events to one instant, so the claims and the failure are the roll-up's.
    metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let past = Utc::now() - TimeDelta::minutes(30);
    for statement in [
        "update operations set created_at = $1, updated_at = $1",
        "update operations set completed_at = $1 where completed_at is not null",
        "update operation_events set at = $1",
    ] {
        sql_at(backend, &db, statement, past).await;
    }
    sql(
        backend,
        &db,
        "update metrics_rollup set rolled_until = rolled_until - 60",
    )
    .await;
    let before = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let expected = [
        ("billing", "refund", 2, 1, 2),
        ("support", "email.send", 1, 0, 0),
    ];
    assert_eq!(tool_rows(&before), expected, "read from the events");

    while metrics.roll_up().await.unwrap() > 0 {}
    let rows = sql(backend, &db, "select count(*) from tool_minutes").await;
    assert_eq!(
        rows,
        Some(4),
        "billing: operations, failures, duplicates; support: operations"
    );
    let after = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(tool_rows(&after), expected, "read from the folded minutes");
    let support = Namespace::try_from("support").unwrap();
    let support_only = metrics
        .tool_metrics(Some(&support), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(tool_rows(&support_only), &expected[1..]);

    if backend == Backend::Sqlite {
        // A million operations with 20,000 `unknown`: 0.2 s when each is read from the table.
        for statement in [GAUGES, TOOL_GAUGES, &SPANS] {
            let plan = sqlite_plan(&db, statement).await;
            assert!(
                plan.contains("COVERING INDEX operations_waiting"),
                "the waiting operations are counted from the index alone: {plan}"
            );
        }
    }
}
