//! PostgreSQL: the scale-out backend. Server processes are stateless and share one database;
//! commits are durable (`synchronous_commit=on`, the server default).

use app::ledger::{Changes, OperationChange};
use app::store_error::StoreError;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use std::time::Duration;

use super::kept_rows::KeptRows;
use super::quiet_events::QuietEvents;
use super::{store_error, OpenError};

mod identity;
mod ledger;
mod metrics;

use crate::storage::audit_sql::impl_audit_store;

/// The channel operation changes are notified on.
const CHANGES_CHANNEL: &str = "idem_operations";

/// The PostgreSQL implementation of every storage port.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    quiet_events: QuietEvents,
    changes: Changes,
}

impl PostgresStore {
    /// None: other processes change the database too, and this one would not hear of
    /// their changes before answering from memory.
    pub(super) fn kept(&self) -> Option<&KeptRows> {
        None
    }

    /// Connects to a `postgres://` URL.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(OpenError::Connect)?;
        let mut listener = PgListener::connect_with(&pool)
            .await
            .map_err(OpenError::Connect)?;
        listener
            .listen(CHANGES_CHANNEL)
            .await
            .map_err(OpenError::Connect)?;
        let changes = Changes::new();
        tokio::spawn(relay_changes(listener, changes.clone()));
        let quiet_events = QuietEvents::start(ledger::quiet_event_sink(pool.clone()));
        Ok(Self {
            pool,
            quiet_events,
            changes,
        })
    }

    /// Every operation change committed by any process on this database.
    pub fn changes(&self) -> &Changes {
        &self.changes
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
        self.quiet_events.flush().await;
        self.pool.close().await;
    }
}

/// Re-publishes in this process every change notified on the database, until the pool
/// closes. `recv` reconnects by itself when the connection drops; notifications sent while it
/// was away are lost (a live view reloads what it shows).
async fn relay_changes(mut listener: PgListener, changes: Changes) {
    loop {
        match listener.recv().await {
            Ok(notification) => {
                match serde_json::from_str::<OperationChange>(notification.payload()) {
                    Ok(change) => changes.publish(change),
                    Err(error) => tracing::warn!(%error, "ignoring a malformed operation change"),
                }
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(error) => {
                tracing::warn!(%error, "lost the operation change listener; reconnecting");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

impl_audit_store!(store: PostgresStore, reader: pool, writer: pool);
