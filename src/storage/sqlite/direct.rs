//! Statements the SQLite writer runs through SQLite's C API itself (by rusqlite), on the
//! handle of sqlx's connection, while sqlx's thread for that connection is locked out.
//!
//! sqlx runs each SQLite connection on a thread of its own and hands it every statement,
//! and every result back, as a message: a thread woken and one parked each way. For the
//! writer's short statements that hand-off costs several times the statement's own work
//! (the bench's grouped floors: the same group commit through rusqlite ran ~4× as many
//! claims a second as through sqlx, README "Performance"). So the writer borrows the handle
//! (one hand-off) and runs its listed statements, and when it can whole transactions —
//! batch after batch while they keep coming — directly, each text prepared once a
//! borrowing. Everything else (pools, reads, migrations, changes staged by
//! arbitrary code) stays on sqlx.
//!
//! Values are encoded by sqlx's own `Encode` implementations, so a row written here holds
//! exactly what sqlx would have written, and sqlx reads it back the same.

use app::store_error::StoreError;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{ffi, ToSql};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::sqlite::{LockedSqliteHandle, SqliteArgumentValue};
use sqlx::{Encode, Sqlite, SqliteConnection};
use std::fmt::{Display, Write as _};

use crate::storage::dialect::SqlValue;
use crate::storage::push_sql::PushSql;
use crate::storage::store_error;

/// How many statement texts a borrowing keeps prepared: the statements of a list of each
/// shape and length (lists come in lengths 1, 2, 4 … 64) and the queries that ask which
/// changes of a list applied.
const PREPARED: usize = 128;

/// Runs `work` on the connection's SQLite handle, with sqlx's thread for it locked out
/// until `work` returns. `work` is synchronous: nothing can cancel it half way.
pub(crate) async fn with_handle<R>(
    conn: &mut SqliteConnection,
    work: impl FnOnce(&rusqlite::Connection) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let borrowed = BorrowedHandle::of(conn).await?;
    work(borrowed.direct())
}

/// The connection's SQLite handle, borrowed from sqlx's thread, which waits until this is
/// dropped; meanwhile statements run on it directly.
pub(crate) struct BorrowedHandle<'c> {
    // Declared first, so dropped first (also when unwinding): see `of`.
    direct: rusqlite::Connection,
    _locked: LockedSqliteHandle<'c>,
}

impl<'c> BorrowedHandle<'c> {
    pub(crate) async fn of(conn: &'c mut SqliteConnection) -> Result<Self, StoreError> {
        let mut locked = conn.lock_handle().await.map_err(store_error)?;
        // SAFETY: the handle is sqlx's open connection, and only this thread uses it while
        // `locked` is held (sqlx's thread waits for the lock). rusqlite does not own it:
        // dropped, it finalizes the statements it prepared and leaves the connection open —
        // and it is dropped before the lock is, so sqlx never closes a handle with
        // statements of ours. Both crates link the same libsqlite3-sys (`cargo tree -i
        // libsqlite3-sys`), so the handle's type is theirs alike; rusqlite sets no hooks on
        // it (its `hooks` features are off), which would replace sqlx's.
        let direct = unsafe { rusqlite::Connection::from_handle(locked.as_raw_handle().as_ptr()) }
            .map_err(direct_error)?;
        direct.set_prepared_statement_cache_capacity(PREPARED);
        Ok(Self {
            direct,
            _locked: locked,
        })
    }

    pub(crate) fn direct(&self) -> &rusqlite::Connection {
        &self.direct
    }
}

/// Translates a rusqlite error as `store_error` does sqlx's: a uniqueness violation is a
/// `Conflict`, the rest are backend failures.
pub(crate) fn direct_error(error: rusqlite::Error) -> StoreError {
    let unique = error.sqlite_error().is_some_and(|failure| {
        matches!(
            failure.extended_code,
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        )
    });
    let unavailable = error.sqlite_error().is_some_and(|failure| {
        crate::storage::sqlite_code_is_unavailable(failure.extended_code & 0xff)
    });
    if unique {
        StoreError::Conflict
    } else if unavailable {
        StoreError::Unavailable(Box::new(error))
    } else {
        StoreError::Backend(Box::new(error))
    }
}

/// One statement: its text with `?` placeholders, and their values in order.
#[derive(Default)]
pub(crate) struct DirectStatement<'a> {
    sql: String,
    values: Vec<SqliteArgumentValue<'a>>,
    /// Why a value could not be encoded, if one could not: the statement is then refused.
    unencoded: Option<BoxDynError>,
}

impl<'a> PushSql<'a, Sqlite> for DirectStatement<'a> {
    fn push(&mut self, sql: impl Display) -> &mut Self {
        write!(self.sql, "{sql}").expect("writing to a String cannot fail");
        self
    }

    fn push_bind<T: SqlValue<'a>>(&mut self, value: T) -> &mut Self {
        self.sql.push('?');
        let before = self.values.len();
        match Encode::<Sqlite>::encode(value, &mut self.values) {
            Ok(IsNull::Yes) => self.values.push(SqliteArgumentValue::Null),
            Ok(IsNull::No) => {}
            Err(error) => {
                // Keep one value per placeholder; the statement will not run anyway.
                self.values.truncate(before);
                self.values.push(SqliteArgumentValue::Null);
                self.unencoded.get_or_insert(error);
            }
        }
        self
    }
}

impl DirectStatement<'_> {
    /// Runs the statement, prepared once a borrowing; the rows it changed.
    pub(crate) fn execute(mut self, direct: &rusqlite::Connection) -> Result<u64, StoreError> {
        self.refuse_unencoded()?;
        let mut statement = direct.prepare_cached(&self.sql).map_err(direct_error)?;
        let changed = statement
            .execute(rusqlite::params_from_iter(self.values.iter().map(Bound)))
            .map_err(direct_error)?;
        Ok(changed as u64)
    }

    /// Runs a query of one row of `columns` booleans.
    pub(crate) fn query_flags(
        mut self,
        direct: &rusqlite::Connection,
        columns: usize,
    ) -> Result<Vec<bool>, StoreError> {
        self.refuse_unencoded()?;
        let mut statement = direct.prepare_cached(&self.sql).map_err(direct_error)?;
        statement
            .query_row(
                rusqlite::params_from_iter(self.values.iter().map(Bound)),
                |row| {
                    (0..columns)
                        .map(|column| row.get::<_, bool>(column))
                        .collect()
                },
            )
            .map_err(direct_error)
    }

    fn refuse_unencoded(&mut self) -> Result<(), StoreError> {
        match self.unencoded.take() {
            Some(error) => Err(StoreError::Backend(error)),
            None => Ok(()),
        }
    }
}

/// A value sqlx encoded, bound as rusqlite binds it.
struct Bound<'v, 'a>(&'v SqliteArgumentValue<'a>);

impl ToSql for Bound<'_, '_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            SqliteArgumentValue::Null => ValueRef::Null,
            SqliteArgumentValue::Text(text) => ValueRef::Text(text.as_bytes()),
            SqliteArgumentValue::Blob(blob) => ValueRef::Blob(blob),
            SqliteArgumentValue::Double(real) => ValueRef::Real(*real),
            SqliteArgumentValue::Int(integer) => ValueRef::Integer(i64::from(*integer)),
            SqliteArgumentValue::Int64(integer) => ValueRef::Integer(*integer),
        }))
    }
}
