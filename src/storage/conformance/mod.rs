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

/// SQLite's plan for a statement, its steps joined.
async fn sqlite_plan(db: &TestDatabase, statement: &str) -> String {
    let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
    let steps: Vec<(i64, i64, i64, String)> =
        sqlx::query_as(&format!("explain query plan {statement}"))
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    steps
        .into_iter()
        .map(|(_, _, _, detail)| detail)
        .collect::<Vec<_>>()
        .join("; ")
}

/// PostgreSQL's plan of `statement` for any parameters (the plan a prepared statement
/// settles on), with these arguments.
async fn postgres_generic_plan(db: &TestDatabase, statement: &str, arguments: &str) -> String {
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let setup =
        format!("set plan_cache_mode = force_generic_plan; prepare candidates as {statement}");
    sqlx::raw_sql(&setup).execute(&mut *conn).await.unwrap();
    let steps: Vec<(String,)> = sqlx::query_as(&format!("explain execute candidates{arguments}"))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    pool.close().await;
    steps
        .into_iter()
        .map(|(step,)| step)
        .collect::<Vec<_>>()
        .join("\n")
}
