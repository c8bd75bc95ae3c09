//! The ledger on SQLite. Every write transaction runs on the single writer connection and
//! starts with `BEGIN IMMEDIATE`, so a claim's read and write can never interleave with
//! another's and no lock upgrade can deadlock.

use app::domain::{Namespace, ToolName, ToolPolicy};
use app::ledger::{
    decide_claim, decide_report, Claim, ClaimRequest, Decision, Event, Fresh, LedgerStore,
    Operation, OperationFilter, RegisteredTool, Report, ReportRefused, Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::types::Json;
use sqlx::{Sqlite, SqliteConnection, Transaction};
use uuid::Uuid;

use super::SqliteStore;
use crate::storage::operation_rows::{
    list_sql, to_text, EventRow, OperationRow, OperationValues, ToolRow, OPERATION_COLUMNS,
};
use crate::storage::store_error;

/// Now, at the precision both databases keep (microseconds).
fn now() -> DateTime<Utc> {
    Utc::now()
        .duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or_else(|_| Utc::now())
}

impl SqliteStore {
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(store_error)
    }
}

async fn live_operation(
    tx: &mut SqliteConnection,
    namespace: &Namespace,
    key: &str,
) -> Result<Option<Operation>, StoreError> {
    let sql = format!("select {OPERATION_COLUMNS} from operations where namespace = ? and key = ? and retired_at is null");
    let row: Option<OperationRow> = sqlx::query_as(&sql)
        .bind(namespace.as_str())
        .bind(key)
        .fetch_optional(tx)
        .await
        .map_err(store_error)?;
    row.map(Operation::try_from).transpose()
}

async fn operation_by_id(
    executor: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<Operation>, StoreError> {
    let sql = format!("select {OPERATION_COLUMNS} from operations where id = ?");
    let row: Option<OperationRow> = sqlx::query_as(&sql)
        .bind(id)
        .fetch_optional(executor)
        .await
        .map_err(store_error)?;
    row.map(Operation::try_from).transpose()
}

async fn apply(tx: &mut SqliteConnection, writes: &[Write]) -> Result<(), StoreError> {
    for write in writes {
        match write {
            Write::Insert(operation) => insert(tx, operation).await?,
            Write::Update {
                after,
                expected_status,
            } => update(tx, after, &to_text(expected_status)).await?,
            Write::Retire { id, at } => {
                sqlx::query(
                    "update operations set retired_at = ? where id = ? and retired_at is null",
                )
                .bind(at)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
            }
        }
    }
    Ok(())
}

async fn insert(tx: &mut SqliteConnection, operation: &Operation) -> Result<(), StoreError> {
    let v = OperationValues::from(operation);
    let sql = format!("insert into operations ({OPERATION_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    sqlx::query(&sql)
        .bind(v.id)
        .bind(v.namespace)
        .bind(v.key)
        .bind(v.key_source)
        .bind(v.tool)
        .bind(v.effect)
        .bind(v.fingerprint)
        .bind(v.args)
        .bind(v.run_id)
        .bind(v.step)
        .bind(v.status)
        .bind(v.attempt)
        .bind(v.result)
        .bind(v.error)
        .bind(v.retryable)
        .bind(v.provider_ref)
        .bind(v.lease_token)
        .bind(v.lease_expires_at)
        .bind(v.created_at)
        .bind(v.updated_at)
        .bind(v.completed_at)
        .bind(v.expires_at)
        .bind(v.approval)
        .execute(tx)
        .await
        .map_err(store_error)?;
    Ok(())
}

/// The guarded transition: zero rows means the operation moved under us, which the
/// transaction's lock rules out; it is reported rather than ignored.
async fn update(
    tx: &mut SqliteConnection,
    after: &Operation,
    expected_status: &str,
) -> Result<(), StoreError> {
    let v = OperationValues::from(after);
    let changed = sqlx::query(
        r#"update operations set status = ?, attempt = ?, result = ?, error = ?, retryable = ?, provider_ref = ?,
               lease_token = ?, lease_expires_at = ?, updated_at = ?, completed_at = ?, expires_at = ?, approval = ?
           where id = ? and status = ?"#,
    )
    .bind(v.status)
    .bind(v.attempt)
    .bind(v.result)
    .bind(v.error)
    .bind(v.retryable)
    .bind(v.provider_ref)
    .bind(v.lease_token)
    .bind(v.lease_expires_at)
    .bind(v.updated_at)
    .bind(v.completed_at)
    .bind(v.expires_at)
    .bind(v.approval)
    .bind(v.id)
    .bind(expected_status)
    .execute(tx)
    .await
    .map_err(store_error)?
    .rows_affected();
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::Stale)
    }
}

async fn insert_events(tx: &mut SqliteConnection, events: &[Event]) -> Result<(), StoreError> {
    for event in events {
        sqlx::query("insert into operation_events (operation_id, at, kind, actor, detail) values (?, ?, ?, ?, ?)")
            .bind(event.operation_id)
            .bind(event.at)
            .bind(event.kind.as_str())
            .bind(&event.actor)
            .bind(Json(&event.detail))
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
    }
    Ok(())
}

/// Commits the decision's writes with its state-changing events.
async fn commit<T>(
    mut tx: Transaction<'static, Sqlite>,
    decision: &Decision<T>,
) -> Result<(), StoreError> {
    if decision.writes.is_empty() {
        return tx.rollback().await.map_err(store_error);
    }
    apply(&mut tx, &decision.writes).await?;
    let state_events: Vec<Event> = decision
        .events
        .iter()
        .filter(|e| e.kind.changes_state())
        .cloned()
        .collect();
    insert_events(&mut tx, &state_events).await?;
    tx.commit().await.map_err(store_error)
}

#[async_trait::async_trait]
impl LedgerStore for SqliteStore {
    async fn claim(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: Fresh,
    ) -> Result<Decision<Claim>, StoreError> {
        let mut tx = self.begin_write().await?;
        let live = live_operation(&mut tx, &request.namespace, &to_text(&request.key)).await?;
        let decision = decide_claim(live, request, actor, fresh, now());
        commit(tx, &decision).await?;
        Ok(decision)
    }

    async fn report(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: &Report,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some(operation) = operation_by_id(&mut tx, id)
            .await?
            .filter(|op| &op.namespace == namespace)
        else {
            return Ok(None);
        };
        let decision = decide_report(operation, token, report, actor, now());
        commit(tx, &decision).await?;
        Ok(Some(decision))
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        insert_events(&mut tx, events).await?;
        tx.commit().await.map_err(store_error)
    }

    async fn operation(&self, id: Uuid) -> Result<Option<Operation>, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(store_error)?;
        operation_by_id(&mut conn, id).await
    }

    async fn list(
        &self,
        filter: &OperationFilter,
        limit: u32,
    ) -> Result<Vec<Operation>, StoreError> {
        let rows: Vec<OperationRow> = sqlx::query_as(&list_sql())
            .bind(filter.namespace.as_ref().map(|n| n.to_string()))
            .bind(filter.status.as_ref().map(to_text))
            .bind(filter.tool.as_ref().map(to_text))
            .bind(filter.run_id.clone())
            .bind(filter.before)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await
            .map_err(store_error)?;
        rows.into_iter().map(Operation::try_from).collect()
    }

    async fn events(&self, id: Uuid) -> Result<Vec<Event>, StoreError> {
        let rows: Vec<EventRow> =
            sqlx::query_as("select operation_id, at, kind, actor, detail from operation_events where operation_id = ? order by seq")
                .bind(id)
                .fetch_all(&self.reader)
                .await
                .map_err(store_error)?;
        rows.into_iter().map(Event::try_from).collect()
    }

    async fn tool(&self, name: &ToolName) -> Result<Option<ToolPolicy>, StoreError> {
        let row: Option<(Json<ToolPolicy>,)> =
            sqlx::query_as("select policy from tools where name = ?")
                .bind(to_text(name))
                .fetch_optional(&self.reader)
                .await
                .map_err(store_error)?;
        Ok(row.map(|(policy,)| policy.0))
    }

    async fn put_tool(
        &self,
        name: &ToolName,
        policy: &ToolPolicy,
    ) -> Result<RegisteredTool, StoreError> {
        let at = now();
        let row: ToolRow = sqlx::query_as(
            r#"insert into tools (name, policy, created_at, updated_at) values (?, ?, ?, ?)
               on conflict (name) do update set policy = excluded.policy, updated_at = excluded.updated_at
               returning name, policy, created_at, updated_at"#,
        )
        .bind(to_text(name))
        .bind(Json(policy))
        .bind(at)
        .bind(at)
        .fetch_one(&self.writer)
        .await
        .map_err(store_error)?;
        RegisteredTool::try_from(row)
    }

    async fn tools(&self) -> Result<Vec<RegisteredTool>, StoreError> {
        let rows: Vec<ToolRow> =
            sqlx::query_as("select name, policy, created_at, updated_at from tools order by name")
                .fetch_all(&self.reader)
                .await
                .map_err(store_error)?;
        rows.into_iter().map(RegisteredTool::try_from).collect()
    }
}
