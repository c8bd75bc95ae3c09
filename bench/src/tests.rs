//! The bench must count what really happened: its successes are what the ledger holds.

use app::domain::OperationStatus;
use app::ledger::{EventKind, OperationFilter};
use sqlx::SqlitePool;
use std::sync::Arc;
use std::time::Duration;

use super::floors::StoreFloor;
use super::grouped::GroupedSqlite;
use super::idem::{IdemHttp, IdemServer};
use super::runner::run_for;
use super::scenario::Scenario;
use super::sequential::SequentialSqlite;
use super::throughput::migrated_sqlite_file;
use super::wrk::{Load, Target, Wrk};
use ::idem::storage::testing::{Backend, TestDatabase};
use ::idem::storage::Database;

async fn succeeded_operations(url: &str) -> u64 {
    let pool = SqlitePool::connect(url).await.expect("open the database");
    let count: i64 =
        sqlx::query_scalar("select count(*) from operations where status = 'succeeded'")
            .fetch_one(&pool)
            .await
            .expect("count succeeded operations");
    pool.close().await;
    count as u64
}

#[tokio::test]
async fn new_claims_over_http_are_counted_exactly_as_the_ledger_holds_them() {
    let database = TestDatabase::create(Backend::Sqlite).await;
    let server = IdemServer::start(database.url())
        .await
        .expect("idem starts");
    let workload = IdemHttp::prepare(&server, Scenario::IdemNew)
        .await
        .expect("prepared");
    let measured = run_for(Arc::new(workload), 2, Duration::from_secs(1)).await;
    server.stop().await;

    assert!(measured.throughput() > 0.0);
    assert_eq!(measured.errors, 0, "{:?}", measured.first_error);
    assert_eq!(succeeded_operations(database.url()).await, measured.ok);
}

#[tokio::test]
async fn the_store_floor_is_counted_exactly_as_the_ledger_holds_it() {
    let database = TestDatabase::create(Backend::Sqlite).await;
    let store = Database::open(database.url()).await.expect("open");
    let workload = StoreFloor::new(store.ledger_store());
    let measured = run_for(Arc::new(workload), 2, Duration::from_millis(500)).await;
    store.close().await;

    assert!(measured.ok > 0);
    assert_eq!(measured.errors, 0, "{:?}", measured.first_error);
    assert_eq!(succeeded_operations(database.url()).await, measured.ok);
}

/// The sequential floor writes what idem writes: every pair it counts is an operation idem
/// reads back as succeeded, with its claimed and completed events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sequential_floor_writes_operations_idem_reads_as_its_own() {
    let (database, path) = migrated_sqlite_file().await.expect("a migrated file");
    let workload = SequentialSqlite::open(&path).expect("open the floor");
    let measured = run_for(Arc::new(workload), 1, Duration::from_millis(300)).await;

    assert!(measured.ok > 0);
    assert_eq!(measured.errors, 0, "{:?}", measured.first_error);
    assert_eq!(succeeded_operations(database.url()).await, measured.ok);
    let store = Database::open(database.url()).await.expect("open");
    let ledger = store.ledger_store();
    let newest = ledger
        .list(&OperationFilter::default(), 1)
        .await
        .expect("idem lists the floor's operations");
    let operation = newest.first().expect("one operation");
    assert_eq!(operation.status, OperationStatus::Succeeded);
    let kinds: Vec<EventKind> = ledger
        .events(operation.id)
        .await
        .expect("its events")
        .into_iter()
        .map(|event| event.kind)
        .collect();
    assert_eq!(kinds, [EventKind::Claimed, EventKind::Completed]);
    store.close().await;
}

/// The grouped floor writes the same operations, and commits many writes together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grouped_floor_writes_the_same_operations_in_fewer_commits() {
    let (database, path) = migrated_sqlite_file().await.expect("a migrated file");
    let workload = Arc::new(GroupedSqlite::open(&path).expect("open the floor"));
    let measured = run_for(workload.clone(), 16, Duration::from_millis(300)).await;

    assert!(measured.ok > 0);
    assert_eq!(measured.errors, 0, "{:?}", measured.first_error);
    assert_eq!(succeeded_operations(database.url()).await, measured.ok);
    // Each pair is two writes; sixteen tasks writing at once share transactions.
    assert!(
        workload.commits() < 2 * measured.ok,
        "{} commits for {} pairs",
        workload.commits(),
        measured.ok
    );
}

/// wrk, or `None` after saying loudly that the test is skipped (`make test` and `make
/// bench-peers` install it: `.ci/install-tools`); under CI a missing wrk fails the test.
fn wrk_or_skip() -> Option<Wrk> {
    match Wrk::find() {
        Ok(wrk) => Some(wrk),
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("wrk is required under CI=true: {why:#}")
        }
        Err(why) => {
            eprintln!("!!! SKIPPING a wrk test: {why:#} !!!");
            None
        }
    }
}

/// wrk's new pairs are completions answered 200; a completion in flight when wrk stopped may
/// still commit, so the ledger holds at most one more per connection than wrk counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_pairs_driven_by_wrk_are_counted_as_the_ledger_holds_them() {
    let Some(wrk) = wrk_or_skip() else { return };
    let database = TestDatabase::create(Backend::Sqlite).await;
    let server = IdemServer::start(database.url())
        .await
        .expect("idem starts");
    let target = Target::new_keys(&server.base, Load::IdemNew, Some(server.authorization()));
    let connections = 4;
    let summary = wrk
        .run(&target, connections, Duration::from_secs(1))
        .await
        .expect("wrk runs");
    server.stop().await;

    assert!(summary.ok > 0, "{summary:?}");
    assert_eq!(summary.errors(), 0, "{summary:?}");
    assert!(
        summary.requests >= 2 * summary.ok,
        "a pair is a claim and a completion: {summary:?}"
    );
    let succeeded = succeeded_operations(database.url()).await;
    assert!(
        (summary.ok..=summary.ok + connections as u64).contains(&succeeded),
        "wrk counted {} pairs, the ledger holds {succeeded}",
        summary.ok
    );
}

/// wrk's replays are claims of the completed keys the bench prepared, answered 200; a
/// prefix whose keys were never completed is answered 201 and counted as unexpected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_driven_by_wrk_ask_for_the_prepared_keys_and_nothing_else() {
    let Some(wrk) = wrk_or_skip() else { return };
    let database = TestDatabase::create(Backend::Sqlite).await;
    let server = IdemServer::start(database.url())
        .await
        .expect("idem starts");
    let prepared = IdemHttp::prepare(&server, Scenario::IdemReplay)
        .await
        .expect("prepared");
    let target = prepared.wrk_target(&server.base, Some(server.authorization()));
    let replays = wrk
        .run(&target, 2, Duration::from_secs(1))
        .await
        .expect("wrk runs");
    let stranger = Target {
        prefix: "never-completed".into(),
        ..target.clone()
    };
    let strangers = wrk
        .run(&stranger, 2, Duration::from_secs(1))
        .await
        .expect("wrk runs");
    server.stop().await;

    assert!(replays.ok > 0, "{replays:?}");
    assert_eq!(replays.errors(), 0, "{replays:?}");
    assert_eq!(replays.ok, replays.requests, "every answer a replay");
    assert_eq!(
        succeeded_operations(database.url()).await,
        target.completed_keys as u64,
        "replays wrote no operation"
    );
    assert_eq!(strangers.ok, 0, "{strangers:?}");
    assert!(strangers.unexpected > 0, "{strangers:?}");
    assert!(
        strangers.first_unexpected.starts_with("201 "),
        "{strangers:?}"
    );
}

#[test]
fn a_run_of_some_parts_is_partial_and_a_plain_run_is_full() {
    use super::{Cli, Part};
    use clap::Parser;
    let plain = Cli::try_parse_from(["idem-bench"])
        .expect("no options")
        .args;
    assert!(plain.runs_every_part());
    let some = Cli::try_parse_from(["idem-bench", "--parts", "postgres,processes"])
        .expect("two parts")
        .args;
    assert_eq!(some.parts, [Part::Postgres, Part::Processes]);
    assert!(some.runs_part(Part::Postgres) && !some.runs_part(Part::Sqlite));
    assert!(!some.runs_every_part());
    assert!(Cli::try_parse_from(["idem-bench", "--parts", "everything"]).is_err());
}
