//! What differs between the two databases under SQL that is otherwise written once for both.
//!
//! The shared SQL is generic over [`Dialect`], which only SQLite and PostgreSQL implement.
//! sqlx states what a generic query needs (every bound value encodable, every row decodable,
//! the connection an executor) as bounds on other types, which Rust does not carry from a
//! trait to its users; so values and rows are bounded by traits of ours that name both
//! databases ([`SqlValue`], [`SqlRow`]), and each database runs a query in its `Dialect`
//! impl, where those bounds are concrete.

use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::query::{Query, QueryAs};
use sqlx::sqlite::SqliteRow;
use sqlx::{Encode, FromRow, PgConnection, Postgres, QueryBuilder, Sqlite, SqliteConnection, Type};
use std::future::Future;

use super::store_error;

/// A value both databases can bind.
pub(crate) trait SqlValue<'q>:
    'q + Send + Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres>
{
}

impl<'q, T> SqlValue<'q> for T where
    T: 'q + Send + Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres>
{
}

/// A row both databases can decode.
pub(crate) trait SqlRow:
    Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow>
{
}

impl<T> SqlRow for T where
    T: Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow>
{
}

/// A query's arguments on `DB`.
pub(crate) type Args<'q, DB> = <DB as sqlx::Database>::Arguments<'q>;

/// A database the ledger runs on: its few words of SQL of its own, and how it runs a query.
pub(crate) trait Dialect: sqlx::Database {
    /// Appended to a read that decides a change: the row lock on PostgreSQL; nothing on
    /// SQLite, where the writer's `BEGIN IMMEDIATE` already excludes every other writer.
    const ROW_LOCK: &'static str;
    /// Appended to a read of work to take, so that work another process took is skipped.
    const SKIP_LOCKED: &'static str;
    /// Run first in a change that may remove an admin, so that two such changes cannot both
    /// pass the last-admin check.
    const LOCK_ADMINS: &'static str;
    /// The Unix minute of the event `e`.
    const EVENT_MINUTE: &'static str;

    /// The whole Unix second (rounded down) of the time `expression`.
    fn unix_second(expression: &str) -> String;

    /// The live operations `unknown` now, as this database's planner reads them from the
    /// partial index `operations_waiting`: SQLite uses it only when the query repeats its
    /// condition; PostgreSQL, given the repeat, misjudges the rows it keeps and reads every
    /// unknown operation from the table instead (0.1 s at 20,000 of them).
    const UNKNOWN_NOW: &'static str;
    /// The live operations awaiting approval now, read as [`Dialect::UNKNOWN_NOW`] reads the
    /// unknown ones.
    const AWAITING_APPROVAL_NOW: &'static str;

    /// `value` as this database binds it (itself: the type only carries the bounds).
    type Bound<'q, T: SqlValue<'q>>: 'q + Encode<'q, Self> + Type<Self>;
    fn value<'q, T: SqlValue<'q>>(value: T) -> Self::Bound<'q, T>;

    /// A query whose rows are `O`s.
    fn query_as<'q, O: SqlRow>(sql: &'q str) -> QueryAs<'q, Self, O, Args<'q, Self>>;

    /// The statement built so far.
    fn build<'q, 'b>(sql: &'b mut QueryBuilder<'q, Self>) -> Query<'b, Self, Args<'b, Self>>;

    /// The query built so far, its rows `O`s.
    fn build_query_as<'q, 'b, O: SqlRow>(
        sql: &'b mut QueryBuilder<'q, Self>,
    ) -> QueryAs<'b, Self, O, Args<'b, Self>>;

    /// Runs a statement; answers how many rows it changed.
    fn execute<'q: 'c, 'c>(
        query: Query<'q, Self, Args<'q, Self>>,
        conn: &'c mut Self::Connection,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Runs a query; answers its rows.
    fn fetch_all<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut Self::Connection,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send + 'c;

    /// Runs a query; answers its first row, if any.
    fn fetch_optional<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut Self::Connection,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'c;

    /// The clock that decides leases and expiry: the database's on PostgreSQL, shared by
    /// every process; the process's on SQLite, which one process serves.
    fn now(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<DateTime<Utc>, StoreError>> + Send + '_;
}

impl Dialect for Sqlite {
    const ROW_LOCK: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const LOCK_ADMINS: &'static str = "select 1";
    // Times are stored as RFC 3339 text, which `strftime('%s', …)` reads.
    const EVENT_MINUTE: &'static str = "(cast(strftime('%s', e.at) as integer) / 60)";
    const UNKNOWN_NOW: &'static str = "retired_at is null \
         and status in ('unknown', 'awaiting_approval') and status = 'unknown'";
    const AWAITING_APPROVAL_NOW: &'static str = "retired_at is null \
         and status in ('unknown', 'awaiting_approval') and status = 'awaiting_approval'";

    fn unix_second(expression: &str) -> String {
        format!("cast(strftime('%s', {expression}) as integer)")
    }

    type Bound<'q, T: SqlValue<'q>> = T;
    fn value<'q, T: SqlValue<'q>>(value: T) -> T {
        value
    }

    fn query_as<'q, O: SqlRow>(sql: &'q str) -> QueryAs<'q, Self, O, Args<'q, Self>> {
        sqlx::query_as(sql)
    }

    fn build<'q, 'b>(sql: &'b mut QueryBuilder<'q, Self>) -> Query<'b, Self, Args<'b, Self>> {
        sql.build()
    }

    fn build_query_as<'q, 'b, O: SqlRow>(
        sql: &'b mut QueryBuilder<'q, Self>,
    ) -> QueryAs<'b, Self, O, Args<'b, Self>> {
        sql.build_query_as()
    }

    async fn execute<'q: 'c, 'c>(
        query: Query<'q, Self, Args<'q, Self>>,
        conn: &'c mut SqliteConnection,
    ) -> Result<u64, sqlx::Error> {
        Ok(query.execute(conn).await?.rows_affected())
    }

    fn fetch_all<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut SqliteConnection,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send + 'c {
        query.fetch_all(conn)
    }

    fn fetch_optional<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut SqliteConnection,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'c {
        query.fetch_optional(conn)
    }

    async fn now(_: &mut SqliteConnection) -> Result<DateTime<Utc>, StoreError> {
        Ok(super::kept_rows::now())
    }
}

impl Dialect for Postgres {
    const ROW_LOCK: &'static str = " for update";
    const SKIP_LOCKED: &'static str = " for update skip locked";
    const LOCK_ADMINS: &'static str =
        "select id from users where role = 'admin' and disabled_at is null for update";
    const EVENT_MINUTE: &'static str = "floor(extract(epoch from e.at) / 60)::bigint";
    const UNKNOWN_NOW: &'static str = "retired_at is null and status = 'unknown'";
    const AWAITING_APPROVAL_NOW: &'static str =
        "retired_at is null and status = 'awaiting_approval'";

    fn unix_second(expression: &str) -> String {
        format!("floor(extract(epoch from {expression}))::bigint")
    }

    type Bound<'q, T: SqlValue<'q>> = T;
    fn value<'q, T: SqlValue<'q>>(value: T) -> T {
        value
    }

    fn query_as<'q, O: SqlRow>(sql: &'q str) -> QueryAs<'q, Self, O, Args<'q, Self>> {
        sqlx::query_as(sql)
    }

    fn build<'q, 'b>(sql: &'b mut QueryBuilder<'q, Self>) -> Query<'b, Self, Args<'b, Self>> {
        sql.build()
    }

    fn build_query_as<'q, 'b, O: SqlRow>(
        sql: &'b mut QueryBuilder<'q, Self>,
    ) -> QueryAs<'b, Self, O, Args<'b, Self>> {
        sql.build_query_as()
    }

    async fn execute<'q: 'c, 'c>(
        query: Query<'q, Self, Args<'q, Self>>,
        conn: &'c mut PgConnection,
    ) -> Result<u64, sqlx::Error> {
        Ok(query.execute(conn).await?.rows_affected())
    }

    fn fetch_all<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send + 'c {
        query.fetch_all(conn)
    }

    fn fetch_optional<'q: 'c, 'c, O: SqlRow + 'c>(
        query: QueryAs<'q, Self, O, Args<'q, Self>>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'c {
        query.fetch_optional(conn)
    }

    async fn now(conn: &mut PgConnection) -> Result<DateTime<Utc>, StoreError> {
        let (now,): (DateTime<Utc>,) = sqlx::query_as("select clock_timestamp()")
            .fetch_one(conn)
            .await
            .map_err(store_error)?;
        Ok(now)
    }
}

/// Binding values of both databases to a statement being built.
pub(crate) trait Bind<'q>: Sized {
    /// Binds `value` to the next placeholder.
    fn param<T: SqlValue<'q>>(self, value: T) -> Self;
}

impl<'q, DB: Dialect> Bind<'q> for Query<'q, DB, Args<'q, DB>> {
    fn param<T: SqlValue<'q>>(self, value: T) -> Self {
        self.bind(DB::value(value))
    }
}

impl<'q, DB: Dialect, O> Bind<'q> for QueryAs<'q, DB, O, Args<'q, DB>> {
    fn param<T: SqlValue<'q>>(self, value: T) -> Self {
        self.bind(DB::value(value))
    }
}

/// Running a statement on either database, mapping its errors at the storage boundary.
pub(crate) trait Run<'q, DB: Dialect> {
    /// Runs it; answers how many rows it changed.
    fn run<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send + 'c
    where
        'q: 'c;
}

impl<'q, DB: Dialect> Run<'q, DB> for Query<'q, DB, Args<'q, DB>> {
    fn run<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send + 'c
    where
        'q: 'c,
    {
        let changed = DB::execute(self, conn);
        async move { changed.await.map_err(store_error) }
    }
}

/// Reading rows with a statement on either database, mapping its errors.
pub(crate) trait Fetch<'q, DB: Dialect, O: SqlRow> {
    fn rows<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send + 'c
    where
        'q: 'c;
    fn maybe_row<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<Option<O>, StoreError>> + Send + 'c
    where
        'q: 'c;
    fn row<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<O, StoreError>> + Send + 'c
    where
        'q: 'c;
}

impl<'q, DB: Dialect, O: SqlRow + 'q> Fetch<'q, DB, O> for QueryAs<'q, DB, O, Args<'q, DB>> {
    fn rows<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send + 'c
    where
        'q: 'c,
    {
        let rows = DB::fetch_all(self, conn);
        async move { rows.await.map_err(store_error) }
    }

    fn maybe_row<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<Option<O>, StoreError>> + Send + 'c
    where
        'q: 'c,
    {
        let row = DB::fetch_optional(self, conn);
        async move { row.await.map_err(store_error) }
    }

    fn row<'c>(
        self,
        conn: &'c mut DB::Connection,
    ) -> impl Future<Output = Result<O, StoreError>> + Send + 'c
    where
        'q: 'c,
    {
        let row = DB::fetch_optional(self, conn);
        async move { row.await.map_err(store_error)?.ok_or_else(no_row) }
    }
}

fn no_row() -> StoreError {
    store_error(sqlx::Error::RowNotFound)
}

/// Binding values of both databases to a statement being built.
pub(crate) trait PushValue<'q> {
    /// Appends a placeholder and binds `value` to it.
    fn push_value<T: SqlValue<'q>>(&mut self, value: T) -> &mut Self;
}

impl<'q, DB: Dialect> PushValue<'q> for QueryBuilder<'q, DB> {
    fn push_value<T: SqlValue<'q>>(&mut self, value: T) -> &mut Self {
        self.push_bind(DB::value(value))
    }
}
