//! What a database holds, read without writing to it (not even to migrate it), and the mark
//! that claims an empty database for the demo. `idem serve --demo` serves only a database
//! that is its own: one it marked when it found it empty.

use chrono::Utc;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ColumnIndex, ConnectOptions, Connection, Decode, Row, Type};
use std::str::FromStr;

use app::store_error::StoreError;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::OpenError;

/// The tables whose rows the demo must not mix with its own, with what they hold.
const REAL_DATA: [(&str, &str); 4] = [
    ("users", "people"),
    ("api_keys", "API keys"),
    ("tools", "tools"),
    ("operations", "operations"),
];

/// The table whose one row says the demo made this database its own.
const DEMO_MARK: &str = "demo_database";

/// What a database holds, as far as the demo cares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Survey {
    /// The demo marked the database as its own (at its first start, when it was empty).
    pub marked_for_demo: bool,
    /// What it holds, of people, API keys, tools and operations (`["people", "tools"]`).
    pub holds: Vec<&'static str>,
}

impl Survey {
    /// Whether the demo may serve this database: its own, or one with nothing in it yet.
    pub fn demo_may_serve(&self) -> bool {
        self.marked_for_demo || self.holds.is_empty()
    }
}

/// Looks at the database behind the URL without changing it: a SQLite file that does not
/// exist is not created (it holds nothing), an existing one is opened read-only.
pub async fn survey(url: &str) -> Result<Survey, OpenError> {
    if url.starts_with("sqlite:") {
        survey_sqlite(url).await
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        survey_postgres(url).await
    } else {
        Err(OpenError::UnsupportedUrl(url.to_owned()))
    }
}

async fn survey_sqlite(url: &str) -> Result<Survey, OpenError> {
    let options = SqliteConnectOptions::from_str(url).map_err(OpenError::Connect)?;
    if !options.get_filename().exists() {
        return Ok(Survey::default());
    }
    let mut connection: SqliteConnection = options
        .read_only(true)
        .create_if_missing(false)
        .connect()
        .await
        .map_err(OpenError::Connect)?;
    let existing: Vec<(String,)> =
        sqlx::query_as("select name from sqlite_master where type = 'table'")
            .fetch_all(&mut connection)
            .await
            .map_err(OpenError::Connect)?;
    let tables = tables_to_read(&existing);
    let row = sqlx::query(&any_rows(&tables))
        .fetch_one(&mut connection)
        .await;
    let _ = connection.close().await;
    Survey::of(&tables, &row.map_err(OpenError::Connect)?)
}

async fn survey_postgres(url: &str) -> Result<Survey, OpenError> {
    let mut connection = PgConnection::connect(url)
        .await
        .map_err(OpenError::Connect)?;
    let existing: Vec<(String,)> = sqlx::query_as(
        "select table_name::text from information_schema.tables \
         where table_schema = current_schema()",
    )
    .fetch_all(&mut connection)
    .await
    .map_err(OpenError::Connect)?;
    let tables = tables_to_read(&existing);
    let row = sqlx::query(&any_rows(&tables))
        .fetch_one(&mut connection)
        .await;
    let _ = connection.close().await;
    Survey::of(&tables, &row.map_err(OpenError::Connect)?)
}

/// Of the tables the survey reads, those that exist (an older or empty schema lacks some).
/// The names come from the constants above, never from the database, so the queries built
/// from them are fixed text.
fn tables_to_read(existing: &[(String,)]) -> Vec<&'static str> {
    std::iter::once(DEMO_MARK)
        .chain(REAL_DATA.map(|(table, _)| table))
        .filter(|name| existing.iter().any(|(table,)| table == name))
        .collect()
}

/// One row: a first column to make it valid without tables, then for each table whether it
/// has any row.
fn any_rows(tables: &[&str]) -> String {
    let mut sql = String::from("select false");
    for table in tables {
        sql.push_str(&format!(", exists(select 1 from {table})"));
    }
    sql
}

impl Survey {
    /// The survey from the answer of [`any_rows`] for `tables`.
    fn of<R: Row>(tables: &[&'static str], row: &R) -> Result<Self, OpenError>
    where
        usize: ColumnIndex<R>,
        bool: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    {
        let mut filled = Vec::new();
        for (column, table) in tables.iter().enumerate() {
            if row
                .try_get::<bool, _>(column + 1)
                .map_err(OpenError::Connect)?
            {
                filled.push(*table);
            }
        }
        Ok(Survey {
            marked_for_demo: filled.contains(&DEMO_MARK),
            holds: REAL_DATA
                .into_iter()
                .filter(|(table, _)| filled.contains(table))
                .map(|(_, what)| what)
                .collect(),
        })
    }
}

/// Claims the (migrated) database for the demo: marks it unless it holds something already,
/// in one statement, so real data written since the survey is never claimed. Returns
/// whether the database is the demo's (marked now or before).
pub(super) async fn claim_for_demo<B: SqlBackend>(store: &SqlStore<B>) -> Result<bool, StoreError> {
    let claim = format!(
        "insert into {DEMO_MARK} (id, marked_at) select 1, $1 \
         where not exists (select 1 from users) and not exists (select 1 from api_keys) \
         and not exists (select 1 from tools) and not exists (select 1 from operations) \
         on conflict (id) do nothing"
    );
    let check = format!("select exists(select 1 from {DEMO_MARK})");
    let mut conn = store.0.write_connection().await?;
    sqlx::query::<B::Db>(&claim)
        .param(Utc::now())
        .run(&mut conn)
        .await?;
    let (marked,): (bool,) = B::Db::query_as(&check).row(&mut conn).await?;
    Ok(marked)
}
