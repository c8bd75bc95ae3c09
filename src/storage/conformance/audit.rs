//! The audit log: appended, read newest first in pages, and never changed.

use app::audit::{AuditEvent, AuditStore};
use chrono::{Duration, DurationRound, Utc};
use serde_json::json;
use sqlx::{Connection, PgConnection, SqliteConnection};
use std::sync::Arc;
use uuid::Uuid;

use super::conformance;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    events_read_back_newest_first_in_pages,
    the_table_refuses_updates_and_deletes,
);

async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Arc<dyn AuditStore>, TestDatabase, Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url())
        .await
        .expect("open the test database");
    check(database.audit_store(), db, backend).await;
    database.close().await;
}

fn event(n: u32, address: Option<&str>) -> AuditEvent {
    AuditEvent {
        id: Uuid::now_v7(),
        at: Utc::now()
            .duration_trunc(Duration::microseconds(1))
            .unwrap(),
        actor: format!("user:person-{n}"),
        address: address.map(str::to_owned),
        action: "api_key.created".into(),
        subject: format!("api_key:{n}"),
        detail: json!({ "n": n, "namespace": "billing", "nested": { "list": [1, "two"] } }),
    }
}

async fn events_read_back_newest_first_in_pages(
    store: Arc<dyn AuditStore>,
    _db: TestDatabase,
    _backend: Backend,
) {
    assert!(store.newest(None, 10).await.unwrap().is_empty());
    let written: Vec<AuditEvent> = (0..5)
        .map(|n| event(n, (n % 2 == 0).then_some("2001:db8::1")))
        .collect();
    for event in &written {
        store.append(event).await.unwrap();
    }
    let newest_first: Vec<AuditEvent> = written.iter().rev().cloned().collect();

    let first = store.newest(None, 3).await.unwrap();
    assert_eq!(
        first,
        newest_first[..3],
        "events read back exactly as written"
    );
    let rest = store.newest(Some(first[2].id), 3).await.unwrap();
    assert_eq!(rest, newest_first[3..]);
    assert!(store.newest(Some(rest[1].id), 3).await.unwrap().is_empty());

    let again = store.append(&written[0]).await;
    assert!(again.is_err(), "an id is written once");
}

async fn the_table_refuses_updates_and_deletes(
    store: Arc<dyn AuditStore>,
    db: TestDatabase,
    backend: Backend,
) {
    let kept = event(1, Some("127.0.0.1"));
    store.append(&kept).await.unwrap();
    let tampering = [
        "update audit_events set actor = 'user:someone-else'",
        "delete from audit_events",
    ];
    for statement in tampering {
        let refused = match backend {
            Backend::Sqlite => {
                let mut conn = SqliteConnection::connect(db.url()).await.unwrap();
                sqlx::query(statement).execute(&mut conn).await.err()
            }
            Backend::Postgres => {
                let mut conn = PgConnection::connect(db.url()).await.unwrap();
                let refused = sqlx::query(statement).execute(&mut conn).await.err();
                let truncate = sqlx::query("truncate audit_events")
                    .execute(&mut conn)
                    .await;
                assert!(truncate.is_err(), "truncate is refused");
                refused
            }
        };
        let refused = refused.unwrap_or_else(|| panic!("{statement} was allowed"));
        assert!(
            refused.to_string().contains("append-only"),
            "{statement}: {refused}"
        );
    }
    assert_eq!(store.newest(None, 10).await.unwrap(), vec![kept]);
}
