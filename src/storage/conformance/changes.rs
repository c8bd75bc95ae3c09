//! Operation changes: every change a store commits is published once to its `Changes`, on
//! SQLite in process and on PostgreSQL through `NOTIFY` and the process's listener.

use app::domain::OperationStatus;
use app::ledger::OperationChange;
use std::time::Duration;
use tokio::sync::broadcast::Receiver;
use tokio::time::timeout;

use super::conformance;
use super::ledger::{request, start};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    claims_and_lease_expiry_are_published_once_each,
);

async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Database) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url())
        .await
        .expect("open the test database");
    check(database.clone()).await;
    database.close().await;
}

async fn next(changes: &mut Receiver<OperationChange>) -> OperationChange {
    timeout(Duration::from_secs(10), changes.recv())
        .await
        .expect("a change arrives within 10 s")
        .expect("the stream is open")
}

async fn claims_and_lease_expiry_are_published_once_each(database: Database) {
    let store = database.ledger_store();
    let mut changes = database.changes().subscribe();

    // A lease of no time at all: over as soon as the claim commits.
    let mut order = request("billing", "order-1", "refund");
    order.policy.lease_seconds = 0;
    let (started, _) = start(store.as_ref(), &order).await;
    let change = next(&mut changes).await;
    assert_eq!(change, OperationChange::from(&started));
    assert_eq!(change.status, OperationStatus::Pending);

    assert_eq!(store.expire_leases(10).await.unwrap(), 1);
    let expired = store.operation(started.id).await.unwrap().unwrap();
    let change = next(&mut changes).await;
    assert_eq!(change, OperationChange::from(&expired));
    assert_eq!(change.status, OperationStatus::Unknown);

    // Nothing came twice: the next change is the next claim's.
    let (other, _) = start(store.as_ref(), &request("billing", "order-2", "refund")).await;
    assert_eq!(next(&mut changes).await.id, other.id);
}
