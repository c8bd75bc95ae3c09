//! PostgreSQL: the scale-out backend. Server processes are stateless and share one database;
//! commits are durable (`synchronous_commit=on`, the server default).

use app::store_error::StoreError;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::Duration;

use super::{store_error, OpenError};

mod identity;
mod ledger;
mod metrics;

use crate::storage::audit_sql::impl_audit_store;

/// The PostgreSQL implementation of every storage port.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to a `postgres://` URL.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(OpenError::Connect)?;
        Ok(Self { pool })
    }

    pub(super) async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("migrations/postgres").run(&self.pool).await
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("select 1")
            .execute(&self.pool)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    pub(super) async fn close(&self) {
        self.pool.close().await;
    }
}

impl_audit_store!(store: PostgresStore, reader: pool, writer: pool);
