//! The ledger on SQLite. Every change runs on the single writer connection and starts with
//! `BEGIN IMMEDIATE`, so a claim's read and write never interleave with another's and no
//! lock upgrade can deadlock. One process owns the file, so its clock decides time.

use app::domain::{Namespace, ToolName, ToolPolicy};
use app::ledger::{
    decide_claim, decide_report, decide_settlement, decide_verdict, expire_lease_at, Claim,
    ClaimRequest, Decision, Event, Fresh, LedgerStore, Operation, OperationChange, OperationFilter,
    RegisteredTool, Report, ReportRefused, SettleRefused, Settlement, Verdict, VerdictRefused,
    Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::types::Json;
use sqlx::{Sqlite, SqliteConnection, Transaction};
use uuid::Uuid;

use super::SqliteStore;
use crate::storage::ledger_sql::impl_ledger_store;
use crate::storage::operation_rows::{
    contains_pattern, list_sql, to_text, EventRow, OperationRow, OperationValues, ToolRow,
    OPERATION_COLUMNS,
};
use crate::storage::store_error;

/// Now, at the precision both databases keep (microseconds).
pub(super) async fn now(_: &mut SqliteConnection) -> Result<DateTime<Utc>, StoreError> {
    Ok(Utc::now()
        .duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or_else(|_| Utc::now()))
}

/// One process owns the file, so its changes need no travel: they are published after the
/// commit, in process.
async fn announce(_: &mut SqliteConnection, _: &[OperationChange]) -> Result<(), StoreError> {
    Ok(())
}

impl SqliteStore {
    fn committed(&self, changes: Vec<OperationChange>) {
        for change in changes {
            self.changes.publish(change);
        }
    }

    pub(super) async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(store_error)
    }
}

impl_ledger_store!(store: SqliteStore, db: Sqlite, conn: SqliteConnection, lock: "",
    skip_locked: "", reader: reader, writer: writer);
