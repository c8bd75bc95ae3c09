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
use sqlx::{Sqlite, SqliteConnection};
use std::sync::Arc;
use uuid::Uuid;

use super::group_commit::GroupCommit;
use super::SqliteStore;
use crate::storage::final_outcomes::{FinalOutcomes, MadeWrites};
use crate::storage::ledger_sql::impl_ledger_store;
use crate::storage::operation_rows::{
    list_query, to_text, EventRow, OperationRow, OperationValues, ToolRow, OPERATION_COLUMNS,
};
use crate::storage::quiet_events::EventSink;
use crate::storage::{store_error, Staging};

/// Now, at the precision both databases keep (microseconds).
pub(super) async fn now(_: &mut SqliteConnection) -> Result<DateTime<Utc>, StoreError> {
    Ok(Utc::now()
        .duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or_else(|_| Utc::now()))
}

/// The live operation of a key and the time it was read at. The writer's `BEGIN IMMEDIATE`
/// is SQLite's lock, so `lock` asks for nothing more.
async fn live_now(
    conn: &mut SqliteConnection,
    namespace: &Namespace,
    key: &str,
    _lock: bool,
) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
    let sql = format!("select {OPERATION_COLUMNS} from operations where namespace = $1 and key = $2 and retired_at is null");
    let live: Option<OperationRow> = sqlx::query_as(&sql)
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(store_error)?;
    let live = live.map(Operation::try_from).transpose()?;
    let now = now(conn).await?;
    Ok(live.map(|operation| (operation, now)))
}

/// An operation by id, in the writer's transaction, and the time it was read at.
async fn locked_now(
    conn: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
    let operation = operation_by_id(conn, id, true).await?;
    let now = now(conn).await?;
    Ok(operation.map(|operation| (operation, now)))
}

impl SqliteStore {
    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut SqliteConnection) -> Staging<'c, T> + Send + 'static,
    {
        self.group_commit.write(work).await
    }
}

/// Quiet events go through the same writer, as one change of many rows.
pub(super) fn quiet_event_sink(writer: GroupCommit) -> Arc<dyn EventSink> {
    Arc::new(QuietEventSink(writer))
}

struct QuietEventSink(GroupCommit);

#[async_trait::async_trait]
impl EventSink for QuietEventSink {
    async fn write_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let events = Arc::new(events.to_vec());
        self.0
            .write(move |tx| {
                let events = events.clone();
                Box::pin(async move {
                    insert_events(tx, &events).await?;
                    Ok(((), Vec::new()))
                })
            })
            .await
    }
}

impl_ledger_store!(store: SqliteStore, db: Sqlite, conn: SqliteConnection, lock: "",
    skip_locked: "", reader: reader);
