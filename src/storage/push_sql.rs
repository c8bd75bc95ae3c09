//! Where a statement's text and its values are written: sqlx's `QueryBuilder`, or the
//! statement the SQLite writer runs through SQLite's C API itself (`sqlite::direct`). The
//! ledger's rows are written once, for both.

use sqlx::{Database, QueryBuilder};

use super::dialect::{Dialect, PushValue, SqlValue};
use std::fmt::Display;

/// A statement being written: text, and values bound in the order their placeholders come.
pub(crate) trait PushSql<'a, DB: Database> {
    /// Appends text.
    fn push(&mut self, sql: impl Display) -> &mut Self;

    /// Appends a placeholder and binds `value` to it.
    fn push_bind<T: SqlValue<'a>>(&mut self, value: T) -> &mut Self;

    /// Values to bind, separated by `, `.
    fn commas(&mut self) -> Commas<'_, Self>
    where
        Self: Sized,
    {
        Commas {
            sql: self,
            first: true,
        }
    }
}

impl<'a, DB: Dialect> PushSql<'a, DB> for QueryBuilder<'a, DB> {
    fn push(&mut self, sql: impl Display) -> &mut Self {
        QueryBuilder::push(self, sql)
    }

    fn push_bind<T: SqlValue<'a>>(&mut self, value: T) -> &mut Self {
        self.push_value(value)
    }
}

/// Binds values separated by `, ` (see [`PushSql::commas`]).
pub(crate) struct Commas<'s, S> {
    sql: &'s mut S,
    first: bool,
}

impl<S> Commas<'_, S> {
    pub(crate) fn push_bind<'a, DB, T>(&mut self, value: T) -> &mut Self
    where
        DB: Database,
        S: PushSql<'a, DB>,
        T: SqlValue<'a>,
    {
        if !self.first {
            self.sql.push(", ");
        }
        self.first = false;
        self.sql.push_bind(value);
        self
    }
}
