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
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};
use std::sync::Arc;
use uuid::Uuid;

use super::group_commit::GroupCommit;
use super::SqliteStore;
use crate::storage::final_outcomes::{FinalOutcomes, MadeWrites};
use crate::storage::ledger_sql::{impl_ledger_store, FirstRead};
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

/// Stages a decision's writes and events as one list of statements, run in one trip to
/// sqlx's SQLite worker thread: on the single writer that trip, not SQLite's work, is what
/// a statement costs, so a change costs one trip instead of one per row.
async fn stage_writes(
    tx: &mut SqliteConnection,
    writes: &[Write],
    events: &[Event],
) -> Result<(), StoreError> {
    let mut sql = QueryBuilder::<Sqlite>::new("");
    let mut statements = 0;
    for write in writes {
        separate(&mut sql, &mut statements);
        push_write(&mut sql, write);
    }
    for chunk in events.chunks(EVENTS_PER_STATEMENT) {
        separate(&mut sql, &mut statements);
        sql.push("insert into operation_events (operation_id, at, kind, actor, detail) ");
        push_event_rows(&mut sql, chunk);
    }
    if statements == 0 {
        return Ok(());
    }
    // Each write changes exactly one row and each event is one; fewer means a guarded
    // transition found the operation moved, which the writer's lock rules out: reported,
    // and the transaction is rolled back.
    if rows_changed(sql, tx).await? == (writes.len() + events.len()) as u64 {
        Ok(())
    } else {
        Err(StoreError::Stale)
    }
}

/// Runs a list of statements; the rows they changed, all together.
async fn rows_changed(
    mut sql: QueryBuilder<'_, Sqlite>,
    tx: &mut SqliteConnection,
) -> Result<u64, StoreError> {
    let done = sql.build().execute(tx).await.map_err(store_error)?;
    Ok(done.rows_affected())
}

fn separate(sql: &mut QueryBuilder<'_, Sqlite>, statements: &mut usize) {
    if *statements > 0 {
        sql.push("; ");
    }
    *statements += 1;
}

/// A claim whose key had no live operation when it was read outside the writer: most likely
/// still so, so the new operation is inserted without reading again, in one trip with its
/// events. The unique index on a key's live operation decides: when another claim took the
/// key in between, the insert does nothing, nor do the events (they follow only if the new
/// operation exists), and `None` sends the claim back to be decided from a fresh read.
async fn claim_new_key(
    tx: &mut SqliteConnection,
    request: &ClaimRequest,
    actor: &str,
    fresh: &Fresh,
) -> Result<Option<(Decision<Claim>, Vec<OperationChange>)>, StoreError> {
    let decision = decide_claim(None, request, actor, fresh.clone(), now(tx).await?);
    let [Write::Insert(operation)] = decision.writes.as_slice() else {
        return Ok(None);
    };
    let events = decision.state_events();
    let mut sql = QueryBuilder::<Sqlite>::new("");
    push_insert(&mut sql, operation);
    sql.push(" on conflict do nothing");
    if !events.is_empty() {
        sql.push("; insert into operation_events (operation_id, at, kind, actor, detail) select * from (");
        push_event_rows(&mut sql, &events);
        sql.push(") where exists (select 1 from operations where id = ")
            .push_bind(operation.id)
            .push(")");
    }
    let changed = rows_changed(sql, tx).await?;
    if changed == 0 {
        return Ok(None);
    }
    if changed != 1 + events.len() as u64 {
        return Err(StoreError::Stale);
    }
    let changes = OperationChange::of_writes(&decision.writes);
    Ok(Some((decision, changes)))
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
