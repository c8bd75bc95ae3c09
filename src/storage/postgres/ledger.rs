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
use crate::storage::final_outcomes::{FinalOutcomes, MadeWrites};
use crate::storage::ledger_sql::{impl_ledger_store, FirstRead};
use crate::storage::operation_rows::{
    list_query, to_text, EventRow, OperationRow, OperationValues, ToolRow, OPERATION_COLUMNS,
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

/// The live operation of a key (locked: `for update`) and the database's time, in one round
/// trip.
async fn live_now(
    conn: &mut PgConnection,
    namespace: &Namespace,
    key: &str,
    lock: bool,
) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
    let lock = if lock { " for update" } else { "" };
    let sql = format!("select {OPERATION_COLUMNS}, clock_timestamp() as read_at from operations where namespace = $1 and key = $2 and retired_at is null{lock}");
    let row: Option<ReadAtRow> = sqlx::query_as(&sql)
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(store_error)?;
    row.map(ReadAtRow::into_pair).transpose()
}

/// An operation by id, locked, and the database's time, in one round trip.
async fn locked_now(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<(Operation, DateTime<Utc>)>, StoreError> {
    let sql = format!("select {OPERATION_COLUMNS}, clock_timestamp() as read_at from operations where id = $1 for update");
    let row: Option<ReadAtRow> = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(conn)
        .await
        .map_err(store_error)?;
    row.map(ReadAtRow::into_pair).transpose()
}

/// Applies writes one statement each (a change's writes are one to three rows).
async fn apply(tx: &mut PgConnection, writes: &[Write]) -> Result<(), StoreError> {
    for write in writes {
        let mut sql = sqlx::QueryBuilder::<Postgres>::new("");
        push_write(&mut sql, write);
        changing(sql, tx, 1).await?;
    }
    Ok(())
}

/// Runs a statement that must change `rows` rows. Fewer means a guarded transition found
/// the operation moved under us, which the transaction's lock rules out; it is reported
/// (`Stale`) rather than ignored.
async fn changing(
    mut sql: sqlx::QueryBuilder<'_, Postgres>,
    tx: &mut PgConnection,
    rows: u64,
) -> Result<(), StoreError> {
    let done = sql.build().execute(tx).await.map_err(store_error)?;
    if done.rows_affected() == rows {
        Ok(())
    } else {
        Err(StoreError::Stale)
    }
}

/// A change's writes and its events, in as few round trips as one statement each can carry:
/// the last write takes the events along in a data-modifying `with` (`with written as
/// (<write> returning 1) insert into operation_events select … from written`), so the usual
/// change of one write is one round trip. The events follow only a write that changed its
/// row; fewer rows than events means it did not (`Stale`, rolled back).
async fn stage_writes(
    tx: &mut PgConnection,
    writes: &[Write],
    events: &[Event],
) -> Result<(), StoreError> {
    let Some((last, first)) = writes.split_last() else {
        return insert_events(tx, events).await;
    };
    apply(tx, first).await?;
    if events.is_empty() || events.len() > EVENTS_PER_STATEMENT {
        apply(tx, std::slice::from_ref(last)).await?;
        return insert_events(tx, events).await;
    }
    let mut sql = sqlx::QueryBuilder::<Postgres>::new("with written as (");
    push_write(&mut sql, last);
    sql.push(" returning 1) ").push(INSERT_EVENTS);
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            sql.push(" union all ");
        }
        sql.push("select ")
            .push_bind(event.operation_id)
            .push(", ")
            .push_bind(event.at)
            .push(", ")
            .push_bind(event.kind.as_str())
            .push(", ")
            .push_bind(&event.actor)
            .push(", ")
            .push_bind(Json(&event.detail))
            .push(" from written");
    }
    changing(sql, tx, events.len() as u64).await
}

/// Always reads first: the locked read of the key also tells the database's time, which a
/// new operation needs, so inserting without it would save no round trip.
async fn claim_new_key(
    _: &mut PgConnection,
    _: &ClaimRequest,
    _: &str,
    _: &Fresh,
) -> Result<Option<(Decision<Claim>, Vec<OperationChange>)>, StoreError> {
    Ok(None)
}

/// Always decided under the lock: the locked read is one round trip here, as the unlocked
/// one would be.
async fn report_from_read(
    _: &PostgresStore,
    _: &Namespace,
    _: Uuid,
    _: &str,
    _: &Report,
    _: &str,
) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError> {
    Ok(None)
}

#[derive(sqlx::FromRow)]
struct ReadAtRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    read_at: DateTime<Utc>,
}

impl ReadAtRow {
    fn into_pair(self) -> Result<(Operation, DateTime<Utc>), StoreError> {
        Ok((Operation::try_from(self.operation)?, self.read_at))
    }
}

impl PostgresStore {
    /// One transaction per change: PostgreSQL commits concurrent transactions together
    /// itself. Changes travel by the `operations_announce` trigger, so nothing is published
    /// here.
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
