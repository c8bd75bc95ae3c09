//! What a database's store gives the SQL written once for both databases.

use app::ledger::Changes;
use app::store_error::StoreError;
use sqlx::pool::PoolConnection;
use sqlx::{Pool, Transaction};

use super::dialect::{Dialect, Run};
use super::retention_sql::{Purged, RetentionRound};
use super::store_error;
use super::written_behind::WrittenBehind;

/// One database's store, as the shared SQL uses it.
pub(crate) trait SqlBackend: Clone + Send + Sync + 'static {
    type Db: Dialect;

    /// The pool reads go to.
    fn reader(&self) -> &Pool<Self::Db>;

    /// The pool changes go to (on SQLite, the one writer connection).
    fn writer(&self) -> &Pool<Self::Db>;

    /// Every operation change committed (on PostgreSQL, by any process).
    fn changes(&self) -> &Changes;

    /// The events written behind their answers and the counts tallied behind them (see `written_behind`).
    fn written_behind(&self) -> &WrittenBehind;

    /// A transaction for changes outside the ledger's own writes (on SQLite, on the one
    /// writer connection, taking its lock at once).
    fn begin_write(
        &self,
    ) -> impl std::future::Future<Output = Result<Transaction<'static, Self::Db>, StoreError>> + Send;

    /// The database's own background tasks that are down now (see `Database::tasks_down`).
    fn tasks_down(&self) -> Vec<&'static str> {
        Vec::new()
    }

    /// Closes every connection, after writing what is queued.
    fn close(&self) -> impl std::future::Future<Output = ()> + Send;

    /// A connection to read on.
    fn read_connection(
        &self,
    ) -> impl std::future::Future<Output = Result<PoolConnection<Self::Db>, StoreError>> + Send
    {
        async { self.reader().acquire().await.map_err(store_error) }
    }

    /// A connection to change things on, outside the ledger's own writes.
    fn write_connection(
        &self,
    ) -> impl std::future::Future<Output = Result<PoolConnection<Self::Db>, StoreError>> + Send
    {
        async { self.writer().acquire().await.map_err(store_error) }
    }
}

/// The storage ports implemented on a backend.
#[derive(Clone)]
pub(crate) struct SqlStore<B>(pub(crate) B);

/// What the server asks of its database besides the ports: health, retention, the demo's
/// mark and shutdown.
#[async_trait::async_trait]
pub(crate) trait Upkeep: Send + Sync {
    /// Whether the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
    /// The database's own background tasks that are down now.
    fn tasks_down(&self) -> Vec<&'static str>;
    /// One retention round (see `retention_sql`).
    async fn purge_round(&self, round: &RetentionRound) -> Result<Purged, StoreError>;
    /// Marks the database as the demo's unless it holds something (see `survey`).
    async fn claim_for_demo(&self) -> Result<bool, StoreError>;
    /// Closes every connection.
    async fn close(&self);
}

#[async_trait::async_trait]
impl<B: SqlBackend> Upkeep for SqlStore<B> {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query::<B::Db>("select 1")
            .run(&mut *self.0.read_connection().await?)
            .await?;
        Ok(())
    }

    fn tasks_down(&self) -> Vec<&'static str> {
        self.0.tasks_down()
    }

    async fn purge_round(&self, round: &RetentionRound) -> Result<Purged, StoreError> {
        SqlStore::purge_round(self, round).await
    }

    async fn claim_for_demo(&self) -> Result<bool, StoreError> {
        super::survey::claim_for_demo(self).await
    }

    async fn close(&self) {
        self.0.close().await
    }
}
