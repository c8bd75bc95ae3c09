//! Changes that are only rows to write, staged in lists: changes of the same shape share
//! each statement, which runs once with the rows of all of them (see `group_commit` for why,
//! and for the writer that gathers them).

use app::ledger::OperationChange;
use app::store_error::StoreError;
#[cfg(test)]
use sqlx::SqliteConnection;

#[cfg(test)]
use super::direct::with_handle;
use super::direct::DirectStatement;
use crate::storage::push_sql::PushSql;

/// A change that is only rows to write, with no read between them, written by statements
/// that changes of the same shape share: a list of such changes runs each statement once,
/// with the rows of all of them.
pub(crate) trait ListedRows: Send + Sync {
    /// What the change's statements look like: changes of the same shape must write the same
    /// text, so that a batch prepares a list's text once. (Were they not, the list would
    /// still be right, only prepared afresh.)
    fn shape(&self) -> Shape;

    /// How many statements the shape runs.
    fn statements(&self) -> usize;

    /// Appends the text of statement `index` that comes before the rows.
    fn push_head(&self, index: usize, sql: &mut DirectStatement<'_>);

    /// Appends this change's rows of statement `index`: one or more `(…)`, separated by `, `.
    fn push_rows<'a>(&'a self, index: usize, sql: &mut DirectStatement<'a>);

    /// Appends the text of statement `index` that comes after the rows; `before` is how many
    /// rows the statement before changes when every change of the list applies.
    fn push_tail(&self, index: usize, before: u64, sql: &mut DirectStatement<'_>);

    /// How many rows statement `index` changes for this change when it applies.
    fn rows(&self, index: usize) -> u64;

    /// For a shape whose changes apply each on its own (every statement writes a change's
    /// rows only if its first did): appends an SQL expression that is true once this change
    /// applied, and says so. The default, `false`, is a shape whose lists apply whole or
    /// not at all.
    fn push_applied<'a>(&'a self, _sql: &mut DirectStatement<'a>) -> bool {
        false
    }
}

/// A listed change and its answer.
pub(crate) trait Listed: ListedRows + 'static {
    type Output: Send + 'static;

    /// The answer and the changes to publish: `applied` when its rows were written, else its
    /// guard held it back and nothing was staged.
    fn answer(&self, applied: bool) -> (Self::Output, Vec<OperationChange>);
}

/// A listed change's kind and how many events it writes: together, its statements' text.
pub(crate) type Shape = (&'static str, usize);

/// Stages changes of one shape as one list, each statement once for all of them: whether
/// each one's rows were written (`false` for a change whose guard held it back, with
/// nothing of it staged: a list of one, or one of a shape whose changes apply each on its
/// own); a list whose statements changed other numbers of rows is `Stale`, to be rolled
/// back.
pub(crate) fn stage_list(
    direct: &rusqlite::Connection,
    list: &[&dyn ListedRows],
) -> Result<Vec<bool>, StoreError> {
    let Some(first) = list.first() else {
        return Ok(Vec::new());
    };
    let statements = first.statements();
    let every = vec![true; list.len()];
    let expected = rows_written(list, &every, statements);
    let mut rows = Vec::with_capacity(statements);
    for index in 0..statements {
        let mut sql = DirectStatement::default();
        first.push_head(index, &mut sql);
        for (n, change) in list.iter().enumerate() {
            if n > 0 {
                sql.push(", ");
            }
            change.push_rows(index, &mut sql);
        }
        let before = index.checked_sub(1).map_or(0, |before| expected[before]);
        first.push_tail(index, before, &mut sql);
        rows.push(sql.execute(direct)?);
    }
    if rows == expected {
        return Ok(every);
    }
    if list.len() == 1 && rows.iter().all(|&changed| changed == 0) {
        return Ok(vec![false]);
    }
    match applied_each(direct, list)? {
        Some(applied) if rows == rows_written(list, &applied, statements) => Ok(applied),
        _ => Err(StoreError::Stale),
    }
}

/// [`stage_list`] in a transaction sqlx has open on `tx`.
#[cfg(test)]
pub(crate) async fn stage_list_in(
    tx: &mut SqliteConnection,
    list: &[&dyn ListedRows],
) -> Result<Vec<bool>, StoreError> {
    with_handle(tx, |direct| stage_list(direct, list)).await
}

/// The rows each statement writes for the changes marked `applied`.
fn rows_written(list: &[&dyn ListedRows], applied: &[bool], statements: usize) -> Vec<u64> {
    (0..statements)
        .map(|index| {
            list.iter()
                .zip(applied)
                .filter(|(_, &applied)| applied)
                .map(|(change, _)| change.rows(index))
                .sum()
        })
        .collect()
}

/// Which changes of a staged list applied, asked in one query, if each of them can tell.
fn applied_each(
    direct: &rusqlite::Connection,
    list: &[&dyn ListedRows],
) -> Result<Option<Vec<bool>>, StoreError> {
    let mut sql = DirectStatement::default();
    sql.push("select ");
    for (n, change) in list.iter().enumerate() {
        if n > 0 {
            sql.push(", ");
        }
        if !change.push_applied(&mut sql) {
            return Ok(None);
        }
    }
    sql.query_flags(direct, list.len()).map(Some)
}
