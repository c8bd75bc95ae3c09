//! The ledger on PostgreSQL. A claim locks the live row of its key (`select … for update`);
//! when there is none yet, two processes may both insert, the unique index lets one win, and
//! the loser's transaction fails with `Conflict` and is retried by the service, then finding
//! the winner's row. Time is the database's, so every process agrees on leases and expiry.

use app::domain::{Namespace, ToolName, ToolPolicy};
use app::ledger::{
    decide_claim, decide_report, decide_settlement, decide_verdict, expire_lease_at, Claim,
    ClaimRequest, Decision, Event, Fresh, LedgerStore, Operation, OperationChange, OperationFilter,
    RegisteredTool, Report, ReportRefused, SettleRefused, Settlement, Verdict, VerdictRefused,
    Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgPool;
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres};
use std::sync::Arc;
use uuid::Uuid;

use super::PostgresStore;
use crate::storage::ledger_sql::impl_ledger_store;
use crate::storage::operation_rows::{
    contains_pattern, list_sql, to_text, EventRow, OperationRow, OperationValues, ToolRow,
    OPERATION_COLUMNS,
};
use crate::storage::quiet_events::EventSink;
use crate::storage::store_error;
use crate::storage::Staging;

/// The database's clock, shared by every idem process.
pub(super) async fn now(tx: &mut PgConnection) -> Result<DateTime<Utc>, StoreError> {
    let (now,): (DateTime<Utc>,) = sqlx::query_as("select clock_timestamp()")
        .fetch_one(tx)
        .await
        .map_err(store_error)?;
    Ok(now)
}

/// Every process hears of every change through the database: a notification sent inside the
/// transaction is delivered only if it commits, and this process hears its own through its
/// listener too (so it publishes nothing itself).
async fn announce(tx: &mut PgConnection, changes: &[OperationChange]) -> Result<(), StoreError> {
    for change in changes {
        let payload =
            serde_json::to_string(change).map_err(|e| StoreError::Backend(Box::new(e)))?;
        sqlx::query("select pg_notify($1, $2)")
            .bind(super::CHANGES_CHANNEL)
            .bind(payload)
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
    }
    Ok(())
}

/// The live operation of a key, read without a lock, and the database's time, in one round
/// trip.
async fn live_now(
    conn: &mut PgConnection,
    namespace: &Namespace,
    key: &str,
) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
    let sql = format!("select {OPERATION_COLUMNS}, clock_timestamp() as read_at from operations where namespace = $1 and key = $2 and retired_at is null");
    let row: Option<LiveRow> = sqlx::query_as(&sql)
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(store_error)?;
    row.map(|row| Ok((Operation::try_from(row.operation)?, row.read_at)))
        .transpose()
}

#[derive(sqlx::FromRow)]
struct LiveRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    read_at: DateTime<Utc>,
}

impl PostgresStore {
    /// One transaction per change: PostgreSQL commits concurrent transactions together
    /// itself. Changes travel by `announce`, so nothing is published here.
    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut PgConnection) -> Staging<'c, T> + Send + 'static,
    {
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let (output, _announced) = work(&mut tx).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(output)
    }
}

/// Quiet events are written in their own transactions, many rows per statement.
pub(super) fn quiet_event_sink(pool: PgPool) -> Arc<dyn EventSink> {
    Arc::new(QuietEventSink(pool))
}

struct QuietEventSink(PgPool);

#[async_trait::async_trait]
impl EventSink for QuietEventSink {
    async fn write_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut tx = self.0.begin().await.map_err(store_error)?;
        insert_events(&mut tx, events).await?;
        tx.commit().await.map_err(store_error)
    }
}

impl_ledger_store!(store: PostgresStore, db: Postgres, conn: PgConnection, lock: " for update",
    skip_locked: " for update skip locked", reader: pool);
