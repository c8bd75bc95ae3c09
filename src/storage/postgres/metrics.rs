//! The metrics on PostgreSQL. Several processes may roll up at once: the one that locks the
//! watermark row folds, the others skip the round, so each minute is folded once.

use app::domain::Namespace;
use app::ledger::metrics::{
    assemble, minute_start, next_rollup, Gauges, KindCount, MetricsReport, MetricsStore,
    MetricsWindow, ReconciledSample, SeriesPlan,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Transaction};

use super::ledger::now;
use super::PostgresStore;
use crate::storage::metrics_sql::{
    fold, impl_metrics_store, raw_counts, FOLDED_COUNTS, GAUGES, RECONCILED,
};
use crate::storage::retention_sql::impl_retention;
use crate::storage::store_error;

impl PostgresStore {
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(store_error)
    }
}

impl_metrics_store!(store: PostgresStore, conn: PgConnection,
    minute: "floor(extract(epoch from e.at) / 60)::bigint", lock: " for update skip locked", reader: pool);

impl_retention!(store: PostgresStore);
