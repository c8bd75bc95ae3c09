//! What keeps the claim path fast must not cost correctness: a replay is answered from a
//! committed read without taking the writer, and the replay's audit event, written behind,
//! still reaches the database.

use app::ledger::{Claim, EventKind, Report};
use sqlx::{Connection, PgConnection, SqliteConnection};
use std::time::Duration;

use super::conformance;
use super::ledger::{fresh, request, start};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    a_replay_is_answered_while_another_writer_holds_the_database,
    quiet_events_recorded_before_close_are_stored,
    a_quiet_event_written_after_a_later_change_is_listed_in_the_order_things_happened,
);

/// These checks need the database itself (another connection, a reopening), not only its
/// ledger store, so each is given the backend and makes its own database.
async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    check(backend).await;
}

/// Another connection's open transaction that keeps every writer out (reads still pass).
enum HeldWriteLock {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

impl HeldWriteLock {
    async fn take(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Sqlite => {
                let mut conn = SqliteConnection::connect(url).await.unwrap();
                sqlx::query("begin immediate")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                Self::Sqlite(conn)
            }
            Backend::Postgres => {
                let mut conn = PgConnection::connect(url).await.unwrap();
                sqlx::query("begin").execute(&mut conn).await.unwrap();
                // EXCLUSIVE lets plain reads through and blocks every write.
                sqlx::query("lock table operations in exclusive mode")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                Self::Postgres(conn)
            }
        }
    }

    async fn release(self) {
        match self {
            Self::Sqlite(mut conn) => {
                sqlx::query("rollback").execute(&mut conn).await.unwrap();
            }
            Self::Postgres(mut conn) => {
                sqlx::query("rollback").execute(&mut conn).await.unwrap();
            }
        }
    }
}

async fn a_replay_is_answered_while_another_writer_holds_the_database(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url()).await.unwrap();
    let store = database.ledger_store();
    let order = request("billing", "order-7", "refund");
    let (started, token) = start(store.as_ref(), &order).await;
    let done = Report::Completed {
        succeeded: true,
        result: Some(serde_json::json!({ "refund_id": "re_1" })),
        error: None,
        retryable: false,
        provider_ref: None,
    };
    store
        .report(&order.namespace, started.id, &token, &done, "agent:test/k")
        .await
        .unwrap();

    let lock = HeldWriteLock::take(backend, db.url()).await;
    // A claim that had to write would wait for the lock (SQLite gives up after its 5 s busy
    // timeout); the bound only tells a hang from an answer.
    let replay = tokio::time::timeout(
        Duration::from_secs(4),
        store.claim(&order, "agent:test/k", fresh()),
    )
    .await
    .expect("a replay must not wait for the writer")
    .unwrap();
    assert!(replay.writes.is_empty());
    match replay.outcome {
        Claim::Replayed { operation, .. } => assert_eq!(operation.id, started.id),
        other => panic!("expected a replay, got {other:?}"),
    }
    store.record_quiet_events(replay.events);
    lock.release().await;

    let kinds: Vec<EventKind> = store
        .events(started.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::Claimed,
            EventKind::Completed,
            EventKind::Replayed
        ],
        "the replay's event is written once the writer is free"
    );
    database.close().await;
}

async fn quiet_events_recorded_before_close_are_stored(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url()).await.unwrap();
    let store = database.ledger_store();
    let order = request("billing", "order-8", "refund");
    let (started, _) = start(store.as_ref(), &order).await;
    let duplicates: Vec<_> = futures_util::future::join_all(
        (0..20).map(|_| store.claim(&order, "agent:test/k", fresh())),
    )
    .await;
    for duplicate in duplicates {
        store.record_quiet_events(duplicate.unwrap().events);
    }
    database.close().await;

    let reopened = Database::open(db.url()).await.unwrap();
    let events = reopened.ledger_store().events(started.id).await.unwrap();
    let rejected = events
        .iter()
        .filter(|e| e.kind == EventKind::InFlightRejected)
        .count();
    assert_eq!(rejected, 20, "closing writes what was recorded");
    reopened.close().await;
}

/// A refused duplicate's event may reach the database after a change that happened later
/// (the operation's completion, a person's resolve): the trail still lists it first.
async fn a_quiet_event_written_after_a_later_change_is_listed_in_the_order_things_happened(
    backend: Backend,
) {
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url()).await.unwrap();
    let store = database.ledger_store();
    let order = request("billing", "order-9", "refund");
    let (started, token) = start(store.as_ref(), &order).await;
    let duplicate = store.claim(&order, "agent:test/k", fresh()).await.unwrap();
    let completion = Report::Completed {
        succeeded: true,
        result: None,
        error: None,
        retryable: false,
        provider_ref: None,
    };
    store
        .report(
            &order.namespace,
            started.id,
            &token,
            &completion,
            "agent:test/k",
        )
        .await
        .unwrap()
        .unwrap()
        .outcome
        .expect("completed");
    // Only now is the duplicate's event handed to the writer behind.
    store.record_quiet_events(duplicate.events);

    let kinds: Vec<EventKind> = store
        .events(started.id)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            EventKind::Claimed,
            EventKind::InFlightRejected,
            EventKind::Completed
        ]
    );
    database.close().await;
}
