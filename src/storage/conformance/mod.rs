//! One suite, every backend: each check runs against a fresh SQLite file and a fresh
//! PostgreSQL database, so the two implementations cannot drift apart.

mod approvals;
mod audit;
mod changes;
mod due;
mod hot_path;
mod identity;
pub(crate) mod ledger;
mod metrics;
mod retention;

/// Runs each named check once per backend, through the given runner.
macro_rules! conformance {
    ($runner:ident; $($check:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $check() { super::$runner(super::Backend::Sqlite, super::$check).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $check() { super::$runner(super::Backend::Postgres, super::$check).await; })*
        }
    };
}
use conformance;

use chrono::{DateTime, Utc};

use crate::storage::dialect::{Bind, Dialect, Fetch};
use crate::storage::testing::{Backend, TestDatabase};

/// Work on one connection to a test database, of whichever kind it is.
trait OnConnection {
    type Output;
    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) -> Self::Output;
}

async fn on_connection<W: OnConnection>(backend: Backend, db: &TestDatabase, work: W) -> W::Output {
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
            let mut conn = pool.acquire().await.unwrap();
            let output = work.run::<sqlx::Sqlite>(&mut conn).await;
            drop(conn);
            pool.close().await;
            output
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
            let mut conn = pool.acquire().await.unwrap();
            let output = work.run::<sqlx::Postgres>(&mut conn).await;
            drop(conn);
            pool.close().await;
            output
        }
    }
}

/// A statement of the same text on both databases, with the times it binds in order.
struct Statement<'a> {
    sql: &'a str,
    times: &'a [DateTime<Utc>],
}

impl OnConnection for Statement<'_> {
    /// The first column of its first row, if it has one.
    type Output = Option<i64>;

    async fn run<DB: Dialect>(&self, conn: &mut DB::Connection) -> Option<i64> {
        let mut query = DB::query_as::<(i64,)>(self.sql);
        for time in self.times {
            query = query.param(*time);
        }
        let row = query.maybe_row(conn).await.unwrap();
        row.map(|(value,)| value)
    }
}

/// Runs a statement without parameters, and returns the first column of its first row if
/// it has one.
async fn sql(backend: Backend, db: &TestDatabase, sql: &str) -> Option<i64> {
    on_connection(backend, db, Statement { sql, times: &[] }).await
}

/// Runs a statement with one time parameter (`$1`).
pub(crate) async fn sql_at(backend: Backend, db: &TestDatabase, sql: &str, at: DateTime<Utc>) {
    on_connection(backend, db, Statement { sql, times: &[at] }).await;
}
