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
