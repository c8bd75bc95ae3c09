//! The audit log's SQL and its `AuditStore` implementation, written once for both databases
//! (the statements are the same text; sqlx binds `$N` on SQLite too).

use app::audit::{AuditEvent, AuditStore};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};

/// Columns selected for an audit event, in `AuditRow` order.
pub const AUDIT_COLUMNS: &str = "id, at, actor, address, action, subject, detail";

/// An audit event as both databases return it.
#[derive(sqlx::FromRow)]
pub struct AuditRow {
    id: Uuid,
    at: DateTime<Utc>,
    actor: String,
    address: Option<String>,
    action: String,
    subject: String,
    detail: Json<Value>,
}

impl From<AuditRow> for AuditEvent {
    fn from(row: AuditRow) -> Self {
        AuditEvent {
            id: row.id,
            at: row.at,
            actor: row.actor,
            address: row.address,
            action: row.action,
            subject: row.subject,
            detail: row.detail.0,
        }
    }
}

#[async_trait::async_trait]
impl<B: SqlBackend> AuditStore for SqlStore<B> {
    async fn append(&self, event: &AuditEvent) -> Result<(), StoreError> {
        let mut conn = self.0.write_connection().await?;
        sqlx::query::<B::Db>(
            r#"insert into audit_events (id, at, actor, address, action, subject, detail)
               values ($1, $2, $3, $4, $5, $6, $7)"#,
        )
        .param(event.id)
        .param(event.at)
        .param(&event.actor)
        .param(&event.address)
        .param(&event.action)
        .param(&event.subject)
        .param(Json(&event.detail))
        .run(&mut conn)
        .await?;
        Ok(())
    }

    async fn newest(
        &self,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        let sql = format!(
            "select {AUDIT_COLUMNS} from audit_events \
             where ($1 is null or id < $1) order by id desc limit $2"
        );
        let mut conn = self.0.read_connection().await?;
        let rows: Vec<AuditRow> = B::Db::query_as(&sql)
            .param(before)
            .param(i64::from(limit))
            .rows(&mut conn)
            .await?;
        Ok(rows.into_iter().map(AuditEvent::from).collect())
    }
}
