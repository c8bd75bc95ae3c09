//! What keeps the claim path fast must not cost correctness: a replay is answered from a
//! committed read without taking the writer, and the replay's audit event, written behind,
//! still reaches the database.

use app::ledger::{Claim, EventKind, LedgerStore, Operation, Report, Settlement};
use app::store_error::StoreError;
use sqlx::{Connection, PgConnection, SqliteConnection};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use super::conformance;
use super::ledger::{fresh, request, start};
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    a_replay_is_answered_while_another_writer_holds_the_database,
    quiet_events_recorded_before_close_are_stored,
    a_quiet_event_written_after_a_later_change_is_listed_in_the_order_things_happened,
    once_an_expiry_or_a_new_attempt_returned_no_claim_is_answered_from_the_row_before,
    replays_racing_an_expiry_never_answer_from_the_old_row_once_it_returned,
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

fn completion(succeeded: bool, retryable: bool) -> Report {
    Report::Completed {
        succeeded,
        result: succeeded.then(|| serde_json::json!({ "ok": true })),
        error: (!succeeded).then(|| serde_json::json!({ "code": "declined" })),
        retryable,
        provider_ref: None,
    }
}

/// Starts and completes the order's operation.
async fn completed(
    store: &dyn LedgerStore,
    order: &app::ledger::ClaimRequest,
    report: &Report,
) -> Operation {
    let (started, token) = start(store, order).await;
    store
        .report(&order.namespace, started.id, &token, report, "agent:test/k")
        .await
        .unwrap()
        .unwrap()
        .outcome
        .expect("completed")
}

/// Starts and completes the order's operation; replays it a few times (on SQLite the
/// server's store now keeps it in memory).
async fn completed_and_replayed(
    store: &dyn LedgerStore,
    order: &app::ledger::ClaimRequest,
    report: &Report,
) -> Operation {
    let started = completed(store, order, report).await;
    for _ in 0..3 {
        let replay = store.claim(order, "agent:test/k", fresh()).await.unwrap();
        assert!(
            matches!(replay.outcome, Claim::Replayed { .. }),
            "{replay:?}"
        );
    }
    started
}

async fn expire(store: &dyn LedgerStore, operation: &Operation) {
    let expire = Settlement::Expire {
        reason: "the customer asked again".into(),
    };
    store
        .settle(operation.id, &expire, "user:ops")
        .await
        .unwrap()
        .unwrap()
        .outcome
        .expect("expired");
}

/// The server's store (`open_to_serve`) answers replays from memory (on PostgreSQL once its
/// first beat came back); a person's expiry and a retryable failure's next attempt must still
/// be seen by the very next claim.
async fn once_an_expiry_or_a_new_attempt_returned_no_claim_is_answered_from_the_row_before(
    backend: Backend,
) {
    let db = TestDatabase::create(backend).await;
    let database = Database::open_to_serve(db.url()).await.unwrap();
    let store = database.ledger_store();

    let order = request("billing", "order-10", "refund");
    let first = completed_and_replayed(store.as_ref(), &order, &completion(true, false)).await;
    expire(store.as_ref(), &first).await;
    match store
        .claim(&order, "agent:test/k", fresh())
        .await
        .unwrap()
        .outcome
    {
        Claim::Started { operation, .. } => assert_ne!(operation.id, first.id),
        other => panic!("an expired key starts afresh, got {other:?}"),
    }

    let retry = request("billing", "order-11", "refund");
    // A retryable failure is not replayed: the claim that reads it goes on to write.
    let failed = completed(store.as_ref(), &retry, &completion(false, true)).await;
    match store
        .claim(&retry, "agent:test/k", fresh())
        .await
        .unwrap()
        .outcome
    {
        Claim::Started { operation, .. } => {
            assert_eq!((operation.id, operation.attempt), (failed.id, 2));
        }
        other => panic!("a retryable failure is tried again, got {other:?}"),
    }
    // The new attempt is running: a duplicate now is in progress, not the old failure.
    let duplicate = store.claim(&retry, "agent:test/k", fresh()).await.unwrap();
    assert!(
        matches!(duplicate.outcome, Claim::InProgress { .. }),
        "{duplicate:?}"
    );
    database.close().await;
}

/// Replays run without pause on several tasks while a person expires the key: every claim
/// begun after the expiry returned sees the new operation, never the old outcome.
async fn replays_racing_an_expiry_never_answer_from_the_old_row_once_it_returned(backend: Backend) {
    let db = TestDatabase::create(backend).await;
    let database = Database::open_to_serve(db.url()).await.unwrap();
    let store = database.ledger_store();
    let order = request("billing", "order-12", "refund");
    let first = completed_and_replayed(store.as_ref(), &order, &completion(true, false)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (store, order, stop) = (store.clone(), order.clone(), stop.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let begun = Instant::now();
                    let claim = match store.claim(&order, "agent:test/k", fresh()).await {
                        Ok(claim) => claim,
                        // Two racers inserted the new operation at once (PostgreSQL); the
                        // ledger retries this, and so does the racer.
                        Err(StoreError::Conflict) => continue,
                        Err(error) => panic!("{error}"),
                    };
                    let replayed_old = matches!(
                        &claim.outcome,
                        Claim::Replayed { operation, .. } if operation.id == first.id
                    );
                    seen.push((begun, replayed_old));
                    // A replay from memory never waits: let the expiry's task run too (this
                    // test's runtime has one thread; a server's requests wait on sockets).
                    tokio::task::yield_now().await;
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    expire(store.as_ref(), &first).await;
    let expired = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);

    let mut before = 0;
    for racer in racers {
        for (begun, replayed_old) in racer.await.unwrap() {
            if begun > expired {
                assert!(
                    !replayed_old,
                    "a claim begun after the expiry returned replayed the old row"
                );
            } else if replayed_old {
                before += 1;
            }
        }
    }
    assert!(
        before > 0,
        "the racers replayed the old row before the expiry"
    );
    database.close().await;
}

/// Shows that the memory is used at all: a row changed behind the store's back (no server
/// does that; the test does, to tell memory from a read) is not seen by a replay of a
/// served SQLite store, and is seen by a store opened by any other command.
#[tokio::test]
async fn sqlite_a_served_store_answers_replays_of_final_outcomes_from_memory() {
    for serving in [true, false] {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let database = if serving {
            Database::open_to_serve(db.url()).await.unwrap()
        } else {
            Database::open(db.url()).await.unwrap()
        };
        let store = database.ledger_store();
        let order = request("billing", "order-13", "refund");
        let first = completed_and_replayed(store.as_ref(), &order, &completion(true, false)).await;

        let mut other = SqliteConnection::connect(db.url()).await.unwrap();
        sqlx::query("update operations set result = '{\"changed\":true}' where id = $1")
            .bind(first.id)
            .execute(&mut other)
            .await
            .unwrap();
        let Claim::Replayed { operation, .. } = store
            .claim(&order, "agent:test/k", fresh())
            .await
            .unwrap()
            .outcome
        else {
            panic!("a replay");
        };
        let expected = if serving {
            serde_json::json!({ "ok": true })
        } else {
            serde_json::json!({ "changed": true })
        };
        assert_eq!(operation.result, Some(expected), "serving: {serving}");
        database.close().await;
    }
}

/// A person's expiry whose request is cancelled after it reached the writer still commits;
/// the kept outcome must still be forgotten, or replays would answer from the old row.
#[tokio::test]
async fn sqlite_an_expiry_whose_caller_went_away_is_still_forgotten() {
    let db = TestDatabase::create(Backend::Sqlite).await;
    let database = Database::open_to_serve(db.url()).await.unwrap();
    let store = database.ledger_store();
    let order = request("billing", "order-14", "refund");
    let first = completed_and_replayed(store.as_ref(), &order, &completion(true, false)).await;

    // The writer waits for this lock, so the expiry is queued but not yet committed when
    // its caller goes away.
    let held = HeldWriteLock::take(Backend::Sqlite, db.url()).await;
    let expiry = {
        let (store, first) = (store.clone(), first.clone());
        tokio::spawn(async move { expire(store.as_ref(), &first).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    expiry.abort();
    held.release().await;

    let waited = Instant::now();
    while store.operation(first.id).await.unwrap().unwrap().expires_at > chrono::Utc::now() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the expiry never committed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match store
        .claim(&order, "agent:test/k", fresh())
        .await
        .unwrap()
        .outcome
    {
        Claim::Started { operation, .. } => assert_ne!(operation.id, first.id),
        other => panic!("the expired key starts afresh, got {other:?}"),
    }
    database.close().await;
}
