//! Operation changes: every change a store commits is published once to its `Changes`, on
//! SQLite in process and on PostgreSQL through `NOTIFY` and the process's listener.

use app::domain::OperationStatus;
use app::ledger::OperationChange;
use std::time::Duration;
use tokio::sync::broadcast::Receiver;
use tokio::time::timeout;

use super::conformance;
use super::ledger::{complete, request, start};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    claims_and_lease_expiry_are_published_once_each,
    replacing_a_final_outcome_is_published_once,
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

/// On PostgreSQL a change to a final operation is also announced inside its transaction (for
/// the outcomes kept in memory); the stream still carries it once.
async fn replacing_a_final_outcome_is_published_once(database: Database) {
    let store = database.ledger_store();
    let mut changes = database.changes().subscribe();
    let order = request("billing", "order-9", "refund");
    let (started, token) = start(store.as_ref(), &order).await;
    let done = complete(
        store.as_ref(),
        &order,
        started.id,
        &token,
        "agent:billing/k",
    )
    .await
    .expect("completed");
    assert_eq!(next(&mut changes).await.status, OperationStatus::Pending);
    assert_eq!(next(&mut changes).await, OperationChange::from(&done));

    let expire = app::ledger::Settlement::Expire {
        reason: "asked again".into(),
    };
    let expired = store
        .settle(done.id, &expire, "user:ops")
        .await
        .unwrap()
        .unwrap()
        .outcome
        .expect("expired");
    assert_eq!(next(&mut changes).await, OperationChange::from(&expired));
    // The key's next claim retires the expired operation (announced for the kept outcomes
    // only) and starts a new one, which is the next change.
    let (again, _) = start(store.as_ref(), &order).await;
    assert_ne!(again.id, done.id);
    assert_eq!(next(&mut changes).await, OperationChange::from(&again));
    let (other, _) = start(store.as_ref(), &request("billing", "order-10", "refund")).await;
    assert_eq!(next(&mut changes).await.id, other.id, "nothing came twice");
}
