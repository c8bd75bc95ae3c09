//! SQLite: the embedded default. WAL with `synchronous=FULL`, so an acknowledged write
//! survives a crash of the process or the machine.

use app::ledger::Changes;
use app::store_error::StoreError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::kept_rows::KeptRows;
use super::written_behind::WrittenBehind;
use super::{store_error, OpenError};
use group_commit::GroupCommit;

mod direct;
mod group_commit;
mod ledger;
mod listed_changes;
mod lists;

/// The SQLite implementation of every storage port.
///
/// SQLite allows one writer at a time, so all writes go through a pool of exactly one
/// connection (they queue in the pool instead of spinning on `SQLITE_BUSY`), while reads use
/// their own pool and, in WAL mode, never wait for the writer. The ledger's changes reach
/// that connection through `group_commit`, which commits those that queue up together and,
/// while they keep coming, keeps the connection for a few dozen batches at a time.
#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    group_commit: GroupCommit,
    written_behind: WrittenBehind,
    changes: Changes,
    /// Kept only by the store `idem serve` opened, which alone changes the file.
    kept: Option<Arc<KeptRows>>,
    /// `idem serve`'s hold on the file, released when the last clone of the store is gone
    /// (or the process is).
    _served: Option<Arc<std::fs::File>>,
}

impl SqliteStore {
    /// Opens the file for `idem serve`: only if no other server holds it, and then holding
    /// it, so that this store alone changes operations and may keep their final outcomes.
    pub async fn open_to_serve(url: &str) -> Result<Self, OpenError> {
        let database_file = SqliteConnectOptions::from_str(url)
            .map_err(OpenError::Connect)?
            .get_filename()
            .to_owned();
        let mut lock_path = database_file.into_os_string();
        lock_path.push("-serve.lock");
        let lock_path = std::path::PathBuf::from(lock_path);
        let lock = std::fs::File::create(&lock_path).map_err(|source| OpenError::Lock {
            path: lock_path.clone(),
            source,
        })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OpenError::ServedElsewhere(lock_path))
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(OpenError::Lock {
                    path: lock_path,
                    source,
                })
            }
        }
        let mut store = Self::open(url).await?;
        store.kept = Some(Arc::default());
        store._served = Some(Arc::new(lock));
        Ok(store)
    }

    /// Opens (creating if missing) the database file of a `sqlite://PATH` URL.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(OpenError::Connect)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        // The writer's temporary data (statement journals, the value lists of a batch's
        // statements) stays in memory: by SQLite's default it spills to files that the writer
        // creates, writes and unlinks in /var/tmp for most batches under load. Readers keep
        // the default, so that a large sort for a report can still spill to disk.
        let writer_options = options.clone().pragma("temp_store", "memory");
        // sqlx pings a pooled connection before lending it, by default: a trip to its
        // thread that can only matter for a server across a network, not for a file.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .test_before_acquire(false)
            .connect_with(writer_options)
            .await
            .map_err(OpenError::Connect)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(OpenError::Connect)?;
        let changes = Changes::new();
        let group_commit =
            GroupCommit::start(writer.clone(), changes.clone()).map_err(OpenError::Writer)?;
        let written_behind = WrittenBehind::start(ledger::behind_sink(group_commit.clone()));
        Ok(Self {
            writer,
            reader,
            group_commit,
            written_behind,
            changes,
            kept: None,
            _served: None,
        })
    }

    pub(super) async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        // A migration may build an index over every row: its sort may spill to disk, where
        // the writer's batches keep their temporary data in memory.
        self.keep_writer_temporary_data_in_memory(false).await?;
        let migrated = sqlx::migrate!("migrations/sqlite").run(&self.writer).await;
        self.keep_writer_temporary_data_in_memory(true).await?;
        migrated?;
        self.hash_lease_tokens_in_clear()
            .await
            .map_err(sqlx::migrate::MigrateError::Execute)
    }

    /// Keeps the writer's temporary data in memory, or where SQLite's default puts it.
    async fn keep_writer_temporary_data_in_memory(
        &self,
        in_memory: bool,
    ) -> Result<(), sqlx::Error> {
        let sql = if in_memory {
            "pragma temp_store = memory"
        } else {
            "pragma temp_store = default"
        };
        sqlx::query(sql).execute(&self.writer).await.map(drop)
    }

    /// Replaces the lease tokens stored in clear (before the ledger stored digests) by their
    /// digests. SQLite has no SHA-256 in SQL, so the migration that made the change listed
    /// them in `lease_tokens_in_clear`; once hashed, the list is empty and this costs a read.
    async fn hash_lease_tokens_in_clear(&self) -> Result<(), sqlx::Error> {
        let mut transaction = self.writer.begin().await?;
        let in_clear: Vec<(uuid::Uuid, String)> = sqlx::query_as(
            "select operations.id, operations.lease_token from lease_tokens_in_clear \
             join operations on operations.id = lease_tokens_in_clear.operation_id \
             where operations.lease_token is not null",
        )
        .fetch_all(&mut *transaction)
        .await?;
        for (id, token) in in_clear {
            sqlx::query("update operations set lease_token = $1 where id = $2")
                .bind(app::ledger::LeaseTokenHash::of(&token).as_str())
                .bind(id)
                .execute(&mut *transaction)
                .await?;
        }
        sqlx::query("delete from lease_tokens_in_clear")
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await
    }
}

impl crate::storage::backend::SqlBackend for SqliteStore {
    type Db = sqlx::Sqlite;

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    fn changes(&self) -> &Changes {
        &self.changes
    }

    fn written_behind(&self) -> &WrittenBehind {
        &self.written_behind
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(store_error)
    }

    fn tasks_down(&self) -> Vec<&'static str> {
        if self.group_commit.is_down() {
            vec!["sqlite_writer"]
        } else {
            Vec::new()
        }
    }

    async fn close(&self) {
        self.written_behind.flush().await;
        self.writer.close().await;
        self.reader.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::backend::SqlBackend as _;
    use crate::storage::testing::{Backend, TestDatabase};

    #[tokio::test]
    async fn one_server_at_a_time_holds_a_file_while_other_commands_still_open_it() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let serving = SqliteStore::open_to_serve(db.url()).await.unwrap();
        let second = SqliteStore::open_to_serve(db.url()).await;
        assert!(
            matches!(second, Err(OpenError::ServedElsewhere(_))),
            "a second server is refused"
        );
        let command = SqliteStore::open(db.url()).await.unwrap();
        command.close().await;

        serving.close().await;
        drop(serving);
        let next = SqliteStore::open_to_serve(db.url()).await.unwrap();
        next.close().await;
    }

    /// The writer keeps SQLite's temporary data in memory (`temp_store = 2`), also once a
    /// migration (which may spill) is done; readers keep the default (0: as SQLite was built,
    /// files), so a large sort may still spill.
    #[tokio::test]
    async fn the_writer_keeps_temporary_data_in_memory() {
        let db = TestDatabase::create(Backend::Sqlite).await;
        let store = SqliteStore::open(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        let temp_store = |pool| async move {
            let setting: i64 = sqlx::query_scalar("pragma temp_store")
                .fetch_one(pool)
                .await
                .unwrap();
            setting
        };
        assert_eq!(temp_store(store.writer()).await, 2, "memory");
        assert_eq!(temp_store(store.reader()).await, 0, "the default");
        store.close().await;
    }
}
