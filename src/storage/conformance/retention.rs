//! Retention: long-expired settled operations go with their events, in small batches, once
//! the metrics roll-up has folded their events; open operations and counters stay.

use app::domain::{Namespace, Role, Username};
use app::identity::{NewSession, NewUser, SecretHash};
use app::ledger::metrics::{MetricsStore, MetricsWindow, DEFAULT_STUCK_AFTER};
use app::ledger::{Event, EventKind};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;
use uuid::Uuid;

use super::conformance;
use super::ledger::{request, start};
use super::metrics::run;
use super::{postgres_generic_plan, sql, sql_at, sqlite_plan};
use crate::storage::retention_sql::CANDIDATES;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::unknown_spans_sql;
use crate::storage::{Database, Purged, RetentionRound};
use crate::workers::RETENTION_BATCH;

conformance!(
    run;
    expired_settled_operations_go_with_their_events_once_folded,
    stuck_unknowns_outlive_the_operations_retention_deletes,
    expired_sessions_go,
);

/// Rounds of `batch` rows at the given time until one deletes nothing; the totals.
async fn purge_all(database: &Database, now: DateTime<Utc>, batch: i64) -> (Purged, u32) {
    let round = RetentionRound {
        expired_before: now - TimeDelta::days(30),
        now,
        batch,
    };
    let (mut total, mut rounds) = (Purged::default(), 0);
    loop {
        let purged = database.purge_round(&round).await.unwrap();
        if !purged.any() {
            return (total, rounds);
        }
        rounds += 1;
        total.operations += purged.operations;
        total.events += purged.events;
        total.sessions += purged.sessions;
    }
}

async fn expired_settled_operations_go_with_their_events_once_folded(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let (ledger, metrics) = (database.ledger_store(), database.metrics_store());
    sql(
        backend,
        &db,
        "update metrics_rollup set rolled_until = rolled_until - 90",
    )
    .await;
    let (done, _) = start(ledger.as_ref(), &request("billing", "order-1", "refund")).await;
    let (open, _) = start(ledger.as_ref(), &request("billing", "order-2", "refund")).await;
    let (recent, _) = start(ledger.as_ref(), &request("billing", "order-3", "refund")).await;
    let replay = |minutes_ago| Event {
        operation_id: done.id,
        at: Utc::now() - TimeDelta::minutes(minutes_ago),
        kind: EventKind::Replayed,
        actor: "system".into(),
        detail: json!({}),
    };
    ledger.record_quiet_events(vec![replay(30), replay(30), replay(30)]);
    let _ = (open.id, recent.id);
    let now = Utc::now();
    let long_ago = now - TimeDelta::days(31);
    // `done` settled and expired 31 days ago; `open` is pending (never deleted); `recent`
    // expired a day ago (kept for the retention period).
    sql_at(
        backend,
        &db,
        "update operations set expires_at = $1 where key in ('order-1', 'order-2')",
        long_ago,
    )
    .await;
    sql_at(
        backend,
        &db,
        "update operations set status = 'succeeded', expires_at = $1 where key = 'order-3'",
        now - TimeDelta::days(1),
    )
    .await;
    sql(
        backend,
        &db,
        "update operations set status = 'succeeded' where key = 'order-1'",
    )
    .await;
    sql_at(
        backend,
        &db,
        "update operation_events set at = $1",
        now - TimeDelta::minutes(30),
    )
    .await;
    let day = MetricsWindow::default();
    let before = metrics
        .metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(before.totals.duplicates_prevented, 3);

    let (purged, _) = purge_all(&database, now, 2).await;
    assert_eq!(purged.operations, 0, "its events are not folded yet");

    while metrics.roll_up().await.unwrap() > 0 {}
    let (purged, rounds) = purge_all(&database, now, 2).await;
    assert_eq!(purged.operations, 1, "only the settled, long-expired one");
    assert!(rounds >= 2, "two events per round: {rounds}");
    let left = sql(backend, &db, "select count(*) from operations").await;
    assert_eq!(left, Some(2));
    let replays = sql(
        backend,
        &db,
        "select count(*) from operation_events where kind = 'replayed'",
    )
    .await;
    assert_eq!(replays, Some(0));
    assert!(ledger.operation(done.id).await.unwrap().is_none());
    let after = metrics
        .metrics(None, &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(before.totals, after.totals, "folded counts stay");
    let billing = Namespace::try_from("billing").unwrap();
    let billing_after = metrics
        .metrics(Some(&billing), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    assert_eq!(billing_after.totals.duplicates_prevented, 3);

    if backend == Backend::Sqlite {
        // Inside the write transaction, once a minute: never through every settled operation.
        let plan = sqlite_plan(&db, CANDIDATES).await;
        assert!(
            plan.contains("USING INDEX operations_by_expiry (status=? AND expires_at<?)")
                && !plan.contains("TEMP B-TREE"),
            "the expired are found by their expiry, and not sorted: {plan}"
        );
        let plan = sqlite_plan(&db, &unknown_spans_sql::fold(RETENTION_BATCH as usize)).await;
        assert!(
            plan.contains("SEARCH e USING INDEX operation_events_by_time (operation_id=?)")
                && !plan.contains("by_kind"),
            "the spans are folded from the events of the operations going, not of all: {plan}"
        );
    } else {
        let plan = postgres_generic_plan(&db, CANDIDATES, "(now(), now(), 200)").await;
        assert!(
            plan.contains("SubPlan") && !plan.contains("Anti Join"),
            "each candidate's events are looked up, never joined as a whole: {plan}"
        );
    }
}

/// The stuck unknowns of each bucket of the last 24 hours, of `namespace` or of all.
async fn stuck_series(metrics: &dyn MetricsStore, namespace: Option<&str>) -> Vec<u64> {
    let namespace = namespace.map(|n| Namespace::try_from(n).unwrap());
    let day = MetricsWindow::default();
    let report = metrics
        .metrics(namespace.as_ref(), &day, DEFAULT_STUCK_AFTER)
        .await
        .unwrap();
    report.series.iter().map(|b| b.stuck_unknown).collect()
}

async fn stuck_unknowns_outlive_the_operations_retention_deletes(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let (ledger, metrics) = (database.ledger_store(), database.metrics_store());
    let (gone, _) = start(ledger.as_ref(), &request("billing", "order-1", "refund")).await;
    let (ancient, _) = start(ledger.as_ref(), &request("billing", "order-2", "refund")).await;
    let now = Utc::now();
    let event = |operation_id, kind, ago: TimeDelta| Event {
        operation_id,
        at: now - ago,
        kind,
        actor: "system".into(),
        detail: json!({}),
    };
    // `gone` was unknown from 3 hours to 1 hour ago (stuck at the end of one hourly bucket);
    // `ancient` from 45 to 40 days ago, older than any window. Both settled and expired long
    // ago, and every event is before the roll-up's watermark.
    ledger.record_quiet_events(vec![
        event(gone.id, EventKind::MarkedUnknown, TimeDelta::hours(3)),
        event(gone.id, EventKind::Resolved, TimeDelta::hours(1)),
        event(ancient.id, EventKind::MarkedUnknown, TimeDelta::days(45)),
        event(ancient.id, EventKind::Resolved, TimeDelta::days(40)),
    ]);
    let long_ago = now - TimeDelta::days(31);
    let settled = "update operations set status = 'succeeded', expires_at = $1";
    sql_at(backend, &db, settled, long_ago).await;
    let claimed = "update operation_events set at = $1 where kind = 'claimed'";
    sql_at(backend, &db, claimed, now - TimeDelta::days(46)).await;
    let before = stuck_series(metrics.as_ref(), None).await;
    assert_eq!(before.iter().sum::<u64>(), 1, "{before:?}");

    // A round of one event folds both spans and leaves `gone` with the events of its span:
    // it is counted once, not from both.
    let round = RetentionRound {
        expired_before: now - TimeDelta::days(30),
        now,
        batch: 1,
    };
    assert_eq!(database.purge_round(&round).await.unwrap().events, 1);
    assert_eq!(stuck_series(metrics.as_ref(), None).await, before);
    // Then two events a round, folding the same spans again: nothing changes either.
    let (purged, rounds) = purge_all(&database, now, 2).await;
    assert_eq!(purged.operations, 2);
    assert!(rounds >= 3, "{rounds}");
    assert_eq!(stuck_series(metrics.as_ref(), None).await, before);
    assert_eq!(
        stuck_series(metrics.as_ref(), Some("billing")).await,
        before
    );
    let elsewhere = stuck_series(metrics.as_ref(), Some("shop")).await;
    assert!(elsewhere.iter().all(|&n| n == 0), "{elsewhere:?}");
    let kept = sql(backend, &db, "select count(*) from unknown_spans").await;
    assert_eq!(
        kept,
        Some(1),
        "only `gone`'s span: `ancient`'s is forgotten"
    );
}

async fn expired_sessions_go(_: Backend, _: TestDatabase, database: Database) {
    let store = database.identity_store();
    let now = Utc::now();
    let user_id = Uuid::now_v7();
    let user = NewUser {
        id: user_id,
        username: Username::try_from("ada").unwrap(),
        role: Role::Admin,
        password_hash: "hash".into(),
        created_at: now,
        must_change_password: false,
    };
    store.insert_user(user).await.unwrap();
    for (token, expires_at) in [
        ("old", now - TimeDelta::minutes(1)),
        ("live", now + TimeDelta::hours(1)),
    ] {
        let session = NewSession {
            token_hash: SecretHash::of(token),
            user_id,
            created_at: now - TimeDelta::hours(2),
            expires_at,
        };
        store.insert_session(session).await.unwrap();
    }
    let (purged, _) = purge_all(&database, now, 200).await;
    assert_eq!(purged.sessions, 1);
    assert!(store
        .session(&SecretHash::of("old"))
        .await
        .unwrap()
        .is_none());
    assert!(store
        .session(&SecretHash::of("live"))
        .await
        .unwrap()
        .is_some());
}
