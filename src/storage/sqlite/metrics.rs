//! The metrics on SQLite. Times are stored as RFC 3339 text, which `strftime('%s', …)` reads.

use app::domain::Namespace;
use app::ledger::metrics::{
    assemble, minute_start, next_rollup, Gauges, KindCount, MetricsReport, MetricsStore,
    MetricsWindow, ReconciledSample, SeriesPlan,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{Sqlite, SqliteConnection, Transaction};

use super::ledger::now;
use super::SqliteStore;
use crate::storage::metrics_sql::{
    fold, impl_metrics_store, raw_counts, FOLDED_COUNTS, GAUGES, RECONCILED,
};
use crate::storage::retention_sql::impl_retention;
use crate::storage::store_error;

impl SqliteStore {
    /// The roll-up's transaction, on the one writer connection.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(store_error)
    }
}

impl_metrics_store!(store: SqliteStore, conn: SqliteConnection,
    minute: "(cast(strftime('%s', e.at) as integer) / 60)", lock: "", reader: reader);

impl_retention!(store: SqliteStore);
