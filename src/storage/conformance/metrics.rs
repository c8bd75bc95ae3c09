//! Metrics: the per-minute roll-up changes no answer, folds each minute once, and keeps
//! namespaces apart; the table by tool is counted as decisions commit.

use app::domain::Namespace;
use app::ledger::metrics::{
    assemble, minute_start, Gauges, MetricsReport, MetricsWindow, SeriesPlan, ToolMeasure,
    ToolTick, ToolsReport, UnknownSpan, DEFAULT_STUCK_AFTER,
};
use app::ledger::{Event, EventKind, Report};
use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use serde_json::json;
use uuid::Uuid;

use super::ledger::{fresh, request, start};
use super::sqlite_plan;
use super::{conformance, on_connection, sql, OnConnection};
use crate::storage::dialect::{Bind, Dialect, Run};
use crate::storage::metrics_sql::{folded_counts, folded_counts_sql, GAUGES, TOOL_GAUGES};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::tool_counts_sql;
use crate::storage::unknown_spans_sql::{self, spans};
use crate::storage::written_behind::Tally;
use crate::storage::Database;

conformance!(
    run;
    folding_past_minutes_changes_no_answer_and_folds_each_minute_once,
    the_table_by_tool_counts_operations_failures_and_duplicates_as_they_commit,
    counts_written_apart_add_up_in_their_minute_and_hour,
    the_upgrade_counts_the_minutes_the_roll_up_had_not_folded,
    a_wide_window_adds_up_whole_hours_and_the_minutes_of_the_hours_its_buckets_cut,
    the_upgrade_adds_the_folded_minutes_up_into_hours,
    open_unknowns_counted_in_groups_draw_the_stuck_series_each_would,
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
    assert_eq!(
        sql(backend, &db, HOURS_APART_FROM_MINUTES).await,
        Some(0),
        "each hour holds its folded minutes, over rounds that began and ended within hours"
    );
    let hours = sql(backend, &db, "select count(*) from event_hours").await;
    assert!(matches!(hours, Some(4..=5)), "{hours:?}");
    let tools_after = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(
        tools_before.tools, tools_after.tools,
        "the table by tool is counted as decisions commit, never by the roll-up"
    );
    let operations: Vec<(&str, u64)> = tools_after
        .tools
        .iter()
        .map(|row| (row.namespace.as_str(), row.operations))
        .collect();
    assert_eq!(operations, [("billing", 1), ("support", 1)]);

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

async fn the_table_by_tool_counts_operations_failures_and_duplicates_as_they_commit(
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
    let report = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    let expected = [
        ("billing", "refund", 2, 1, 2),
        ("support", "email.send", 1, 0, 0),
    ];
    assert_eq!(tool_rows(&report), expected);
    for table in ["tool_minutes", "tool_hours"] {
        let total = sql(
            backend,
            &db,
            &format!("select cast(sum(count) as bigint) from {table}"),
        )
        .await;
        assert_eq!(
            total,
            Some(6),
            "{table}: every count is written by the read"
        );
    }
    // The roll-up folds events of its own; the table by tool is not among them.
    sql(
        backend,
        &db,
        "update metrics_rollup set rolled_until = rolled_until - 60",
    )
    .await;
    while metrics.roll_up().await.unwrap() > 0 {}
    let after = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(
        tool_rows(&after),
        expected,
        "the roll-up counted nothing twice"
    );
    let support = Namespace::try_from("support").unwrap();
    let support_only = metrics
        .tool_metrics(Some(&support), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(tool_rows(&support_only), &expected[1..]);

    if backend == Backend::Sqlite {
        // A million operations with 20,000 `unknown`: 0.2 s when each is read from the table.
        for statement in [GAUGES, TOOL_GAUGES, &spans::<sqlx::Sqlite>()] {
            let plan = sqlite_plan(&db, statement).await;
            assert!(
                plan.contains("COVERING INDEX operations_waiting"),
                "the waiting operations are counted from the index alone: {plan}"
            );
        }
    }
}

/// Adds a tally as the writer behind the answers does, in a transaction of its own.
struct AddTally<'a>(&'a Tally);

impl OnConnection for AddTally<'_> {
    type Output = ();

    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) {
        sqlx::query::<DB>("begin").run(&mut *conn).await.unwrap();
        tool_counts_sql::add::<DB>(&mut *conn, self.0)
            .await
            .unwrap();
        sqlx::query::<DB>("commit").run(conn).await.unwrap();
    }
}

async fn add_tally(backend: Backend, db: &TestDatabase, tally: &Tally) {
    on_connection(backend, db, AddTally(tally)).await;
}

async fn counts_written_apart_add_up_in_their_minute_and_hour(
    backend: Backend,
    db: TestDatabase,
    _database: Database,
) {
    // The last minute of hour 480,000 and the first of the next.
    let last_minute = 480_000 * 60 + 59;
    let tick = |minute: i64, measure: ToolMeasure| ToolTick {
        minute,
        namespace: "billing".into(),
        tool: "refund".into(),
        measure,
    };
    let first = Tally::from([
        (tick(last_minute, ToolMeasure::Operations), 2),
        (tick(last_minute + 1, ToolMeasure::Operations), 1),
        (tick(last_minute, ToolMeasure::Failures), 1),
    ]);
    add_tally(backend, &db, &first).await;
    let second = Tally::from([(tick(last_minute, ToolMeasure::Operations), 3)]);
    add_tally(backend, &db, &second).await;

    let count = |table: &str, time: &str, at: i64, measure: &str| {
        format!("select count from {table} where {time} = {at} and measure = '{measure}'")
    };
    let minute = |at, measure| count("tool_minutes", "bucket", at, measure);
    let hour = |at, measure| count("tool_hours", "hour", at, measure);
    assert_eq!(
        sql(backend, &db, &minute(last_minute, "operations")).await,
        Some(5)
    );
    assert_eq!(
        sql(backend, &db, &minute(last_minute + 1, "operations")).await,
        Some(1)
    );
    assert_eq!(
        sql(backend, &db, &minute(last_minute, "failures")).await,
        Some(1)
    );
    assert_eq!(
        sql(backend, &db, &hour(480_000, "operations")).await,
        Some(5)
    );
    assert_eq!(
        sql(backend, &db, &hour(480_001, "operations")).await,
        Some(1)
    );
    assert_eq!(sql(backend, &db, &hour(480_000, "failures")).await, Some(1));
    let rows = "select (select count(*) from tool_minutes) + (select count(*) from tool_hours)";
    assert_eq!(
        sql(backend, &db, rows).await,
        Some(6),
        "one row per minute or hour and measure"
    );
}

/// Runs a script of several statements.
async fn script(backend: Backend, db: &TestDatabase, statements: &str) {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
            sqlx::raw_sql(statements).execute(&pool).await.unwrap();
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
            sqlx::raw_sql(statements).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

async fn the_upgrade_counts_the_minutes_the_roll_up_had_not_folded(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let (ledger, metrics) = (database.ledger_store(), database.metrics_store());
    start(ledger.as_ref(), &request("billing", "order-1", "refund")).await;
    start(ledger.as_ref(), &request("billing", "order-2", "refund")).await;
    let day = MetricsWindow::default();
    let counted = metrics
        .tool_metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(tool_rows(&counted), [("billing", "refund", 2, 0, 0)]);

    // As the version before left it: the roll-up had folded up to two hours ago (an hour's
    // row holds what it folded of that hour), and nothing since was counted.
    script(
        backend,
        &db,
        "update metrics_rollup set rolled_until = rolled_until - 120; \
         delete from tool_minutes; delete from tool_hours; \
         insert into tool_hours (hour, namespace, tool, measure, count) \
         select rolled_until / 60, 'billing', 'refund', 'operations', 10 \
         from metrics_rollup where name = 'event_minutes'",
    )
    .await;
    let upgrade = match backend {
        Backend::Sqlite => {
            include_str!("../../../migrations/sqlite/20261207000000_tool_counts_as_written.sql")
        }
        Backend::Postgres => {
            include_str!("../../../migrations/postgres/20261207000000_tool_counts_as_written.sql")
        }
    };
    script(backend, &db, upgrade).await;

    let total = |table: &str| {
        format!("select cast(sum(count) as bigint) from {table} where measure = 'operations'")
    };
    assert_eq!(sql(backend, &db, &total("tool_minutes")).await, Some(2));
    assert_eq!(
        sql(backend, &db, &total("tool_hours")).await,
        Some(12),
        "added to the hour the roll-up had begun"
    );
}

/// Rows of `event_hours` that are not the sum of their folded minutes, and hours of folded
/// minutes that `event_hours` lacks.
const HOURS_APART_FROM_MINUTES: &str = "select
    (select count(*) from (
        select bucket / 60 as hour, namespace, kind, cast(sum(count) as bigint) as count
        from event_minutes group by 1, 2, 3
        except select hour, namespace, kind, count from event_hours) as missing)
    + (select count(*) from (
        select hour, namespace, kind, count from event_hours
        except select bucket / 60, namespace, kind, cast(sum(count) as bigint)
        from event_minutes group by 1, 2, 3) as extra)";

/// The last minute of the folded month below.
const MONTH_END: i64 = 480_000 * 60 + 120;

/// What the month below holds in `minute`: billing's replays vary by minute, support's are 1.
fn month_count(namespace: &str, minute: i64) -> i64 {
    match namespace {
        "billing" => minute % 7 + 1,
        _ => 1,
    }
}

/// The folded counts per bucket and kind of a window before a split, sorted.
struct FoldedCounts<'a> {
    plan: &'a SeriesPlan,
    split: i64,
    namespace: Option<String>,
}

impl OnConnection for FoldedCounts<'_> {
    type Output = Vec<(i64, String, i64)>;

    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) -> Self::Output {
        let counts = folded_counts::<DB>(conn, self.plan, self.split, &self.namespace).await;
        let mut counts = counts.unwrap();
        counts.sort();
        counts
    }
}

async fn a_wide_window_adds_up_whole_hours_and_the_minutes_of_the_hours_its_buckets_cut(
    backend: Backend,
    db: TestDatabase,
    _database: Database,
) {
    // Thirty-one days of folded minutes in two namespaces, with their hours as the roll-up
    // leaves them.
    let first = MONTH_END - 31 * 24 * 60;
    script(
        backend,
        &db,
        &format!(
            "with recursive m(b) as (
                 select cast({first} as bigint) union all select b + 1 from m where b < {MONTH_END})
             insert into event_minutes (bucket, namespace, kind, count)
             select b, 'billing', 'replayed', b % 7 + 1 from m
             union all select b, 'support', 'replayed', 1 from m;
             insert into event_hours (hour, namespace, kind, count)
             select bucket / 60, namespace, kind, sum(count) from event_minutes group by 1, 2, 3;"
        ),
    )
    .await;
    for window in ["30d", "7d", "49h", "24h", "90m"] {
        let window = MetricsWindow::try_from(window).unwrap();
        for end_offset in [0, 20, 58, 59] {
            let now = minute_start(480_000 * 60 + end_offset);
            let plan = SeriesPlan::new(window.clone(), now, DEFAULT_STUCK_AFTER);
            for split in [
                plan.end_minute,
                plan.end_minute - 45,
                plan.start_minute + 90,
            ] {
                for namespace in [None, Some("billing".to_owned())] {
                    let mut expected = std::collections::BTreeMap::<i64, i64>::new();
                    for minute in plan.start_minute..split {
                        let back = plan.back_of_minute(minute).unwrap() as i64;
                        for ns in ["billing", "support"] {
                            if namespace.as_deref().is_none_or(|only| only == ns) {
                                *expected.entry(back).or_default() += month_count(ns, minute);
                            }
                        }
                    }
                    let expected: Vec<(i64, String, i64)> = expected
                        .into_iter()
                        .map(|(back, count)| (back, "replayed".to_owned(), count))
                        .collect();
                    let read = FoldedCounts {
                        plan: &plan,
                        split,
                        namespace: namespace.clone(),
                    };
                    let read = on_connection(backend, &db, read).await;
                    assert_eq!(
                        read, expected,
                        "{window} ending {end_offset} past the hour, split at {split}, {namespace:?}"
                    );
                }
            }
        }
    }
    if backend == Backend::Sqlite {
        let week = MetricsWindow::try_from("7d").unwrap();
        let plan = SeriesPlan::new(week, minute_start(480_000 * 60 + 20), DEFAULT_STUCK_AFTER);
        let statement = folded_counts_sql::<sqlx::Sqlite>(&plan, plan.end_minute);
        let plan = sqlite_plan(&db, &statement).await;
        assert!(
            !plan.contains("SCAN event_") && plan.matches("SEARCH event_minutes").count() == 29,
            "each range of minutes and the whole hours are sought by their keys: {plan}"
        );
    }
}

async fn the_upgrade_adds_the_folded_minutes_up_into_hours(
    backend: Backend,
    db: TestDatabase,
    _database: Database,
) {
    // As the version before left it: minutes folded into the last minutes of one hour and
    // the first of the next, and no table of hours.
    script(
        backend,
        &db,
        "drop table event_hours; \
         insert into event_minutes (bucket, namespace, kind, count) values \
         (28800058, 'billing', 'replayed', 2), (28800059, 'billing', 'replayed', 3), \
         (28800059, 'support', 'replayed', 1), (28800060, 'billing', 'replayed', 4)",
    )
    .await;
    let upgrade = match backend {
        Backend::Sqlite => {
            include_str!("../../../migrations/sqlite/20261208000000_event_hours.sql")
        }
        Backend::Postgres => {
            include_str!("../../../migrations/postgres/20261208000000_event_hours.sql")
        }
    };
    script(backend, &db, upgrade).await;
    let hour = |hour: i64, namespace: &str| {
        format!("select count from event_hours where hour = {hour} and namespace = '{namespace}'")
    };
    assert_eq!(sql(backend, &db, &hour(480_000, "billing")).await, Some(5));
    assert_eq!(sql(backend, &db, &hour(480_000, "support")).await, Some(1));
    assert_eq!(sql(backend, &db, &hour(480_001, "billing")).await, Some(4));
    assert_eq!(sql(backend, &db, HOURS_APART_FROM_MINUTES).await, Some(0));
}

/// Marks the operations `unknown`, each since its time, behind the store's back.
struct MakeUnknown<'a>(&'a [(Uuid, DateTime<Utc>)]);

impl OnConnection for MakeUnknown<'_> {
    type Output = ();

    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) {
        let sql = "update operations set status = 'unknown', unknown_since = $1 where id = $2";
        for (id, since) in self.0 {
            let query = sqlx::query::<DB>(sql).param(*since).param(*id);
            query.run(&mut *conn).await.unwrap();
        }
    }
}

/// The spans the stuck series of a plan is drawn from, as the store reads them.
struct Spans<'a>(&'a SeriesPlan);

impl OnConnection for Spans<'_> {
    type Output = Vec<UnknownSpan>;

    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) -> Self::Output {
        unknown_spans_sql::read::<DB>(conn, self.0, &None)
            .await
            .unwrap()
    }
}

fn stuck_series(plan: &SeriesPlan, spans: &[UnknownSpan]) -> Vec<u64> {
    let report = assemble(plan, &[], &[], spans, Gauges::default());
    report.series.iter().map(|b| b.stuck_unknown).collect()
}

async fn open_unknowns_counted_in_groups_draw_the_stuck_series_each_would(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    // A threshold that is not whole minutes, and unknowns that began on either side of the
    // moment each bucket's end makes them stuck, by a millisecond and by seconds, and before
    // the window.
    let threshold = TimeDelta::seconds(90);
    // To the microsecond, as PostgreSQL keeps times and tells the time.
    let now = Utc::now().trunc_subsecs(6);
    let plans: Vec<SeriesPlan> = ["6h", "7d"]
        .into_iter()
        .map(|window| SeriesPlan::new(MetricsWindow::try_from(window).unwrap(), now, threshold))
        .collect();
    let mut since = Vec::new();
    for plan in &plans {
        since.push(plan.from() - threshold - TimeDelta::seconds(1));
        for back in 0..plan.buckets() {
            let stuck_from = plan.bucket_end(back) - threshold;
            for ms in [-30_000, -1_000, -1, 0, 1, 999, 1_000] {
                since.push(stuck_from + TimeDelta::milliseconds(ms));
            }
        }
    }
    let ledger = database.ledger_store();
    let mut unknown = Vec::new();
    for (n, at) in since.iter().enumerate() {
        let key = format!("order-{n}");
        let (operation, _) = start(ledger.as_ref(), &request("billing", &key, "refund")).await;
        unknown.push((operation.id, *at));
    }
    on_connection(backend, &db, MakeUnknown(&unknown)).await;

    let each: Vec<UnknownSpan> = since
        .iter()
        .map(|&since| UnknownSpan {
            since,
            until: None,
            operations: 1,
        })
        .collect();
    for plan in &plans {
        let read = on_connection(backend, &db, Spans(plan)).await;
        let expected = stuck_series(plan, &each);
        assert_eq!(stuck_series(plan, &read), expected, "{}", plan.window);
        assert!(
            expected.windows(2).any(|pair| pair[0] != pair[1]),
            "the unknowns become stuck along the series: {expected:?}"
        );
        let operations: u64 = read.iter().map(|span| span.operations).sum();
        assert_eq!(operations, since.len() as u64);
        assert!(
            read.len() <= 2 * (plan.buckets() + 2) + 1,
            "{}: {} rows for {} unknowns in {} buckets",
            plan.window,
            read.len(),
            since.len(),
            plan.buckets()
        );
    }
}
