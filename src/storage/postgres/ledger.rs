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
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

use super::PostgresStore;
use crate::storage::ledger_sql::impl_ledger_store;
use crate::storage::operation_rows::{
    contains_pattern, list_sql, to_text, EventRow, OperationRow, OperationValues, ToolRow,
    OPERATION_COLUMNS,
};
use crate::storage::store_error;

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

impl PostgresStore {
    fn committed(&self, _: Vec<OperationChange>) {}

    pub(super) async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(store_error)
    }
}

impl_ledger_store!(store: PostgresStore, db: Postgres, conn: PgConnection, lock: " for update",
    skip_locked: " for update skip locked", reader: pool, writer: pool);
