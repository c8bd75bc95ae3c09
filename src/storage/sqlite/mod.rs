//! SQLite: the embedded default. WAL with `synchronous=FULL`, so an acknowledged write
//! survives a crash of the process or the machine.

use app::ledger::Changes;
use app::store_error::StoreError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

use super::quiet_events::QuietEvents;
use super::{store_error, OpenError};
use group_commit::GroupCommit;

mod group_commit;
mod identity;
mod ledger;
mod metrics;

use crate::storage::audit_sql::impl_audit_store;

/// The SQLite implementation of every storage port.
///
/// SQLite allows one writer at a time, so all writes go through a pool of exactly one
/// connection (they queue in the pool instead of spinning on `SQLITE_BUSY`), while reads use
/// their own pool and, in WAL mode, never wait for the writer. The ledger's changes reach
/// that connection through `group_commit`, which commits those that queue up together.
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    group_commit: GroupCommit,
    quiet_events: QuietEvents,
    changes: Changes,
}

impl SqliteStore {
    /// Opens (creating if missing) the database file of a `sqlite://PATH` URL.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(OpenError::Connect)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .map_err(OpenError::Connect)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .map_err(OpenError::Connect)?;
        let changes = Changes::new();
        let group_commit = GroupCommit::start(writer.clone(), changes.clone());
        let quiet_events = QuietEvents::start(ledger::quiet_event_sink(group_commit.clone()));
        Ok(Self {
            writer,
            reader,
            group_commit,
            quiet_events,
            changes,
        })
    }

    /// Every operation change committed through this store.
    pub fn changes(&self) -> &Changes {
        &self.changes
    }

    pub(super) async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("migrations/sqlite").run(&self.writer).await
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("select 1")
            .execute(&self.reader)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    pub(super) async fn close(&self) {
        self.quiet_events.flush().await;
        self.writer.close().await;
        self.reader.close().await;
    }
}

impl_audit_store!(store: SqliteStore, reader: reader, writer: writer);
