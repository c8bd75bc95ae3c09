//! The audit log's SQL and its `AuditStore` implementation, written once for both databases
//! (the statements are the same text; sqlx binds `$N` on SQLite too).

use app::audit::AuditEvent;
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

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

impl TryFrom<AuditRow> for AuditEvent {
    type Error = StoreError;
    fn try_from(row: AuditRow) -> Result<Self, StoreError> {
        Ok(AuditEvent {
            id: row.id,
            at: row.at,
            actor: row.actor,
            address: row.address,
            action: row.action,
            subject: row.subject,
            detail: row.detail.0,
        })
    }
}

/// Implements `AuditStore` for a backend store whose pools are named `$reader` (reads) and
/// `$writer` (appends).
macro_rules! impl_audit_store {
    (store: $store:ident, reader: $reader:ident, writer: $writer:ident) => {
        #[async_trait::async_trait]
        impl app::audit::AuditStore for $store {
            async fn append(
                &self,
                event: &app::audit::AuditEvent,
            ) -> Result<(), app::store_error::StoreError> {
                sqlx::query(
                    r#"insert into audit_events (id, at, actor, address, action, subject, detail)
                       values ($1, $2, $3, $4, $5, $6, $7)"#,
                )
                .bind(event.id)
                .bind(event.at)
                .bind(&event.actor)
                .bind(&event.address)
                .bind(&event.action)
                .bind(&event.subject)
                .bind(sqlx::types::Json(&event.detail))
                .execute(&self.$writer)
                .await
                .map_err($crate::storage::store_error)?;
                Ok(())
            }

            async fn newest(
                &self,
                before: Option<uuid::Uuid>,
                limit: u32,
            ) -> Result<Vec<app::audit::AuditEvent>, app::store_error::StoreError> {
                use $crate::storage::audit_sql::{AuditRow, AUDIT_COLUMNS};
                let sql = format!(
                    "select {AUDIT_COLUMNS} from audit_events \
                     where ($1 is null or id < $1) order by id desc limit $2"
                );
                let rows: Vec<AuditRow> = sqlx::query_as(&sql)
                    .bind(before)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await
                    .map_err($crate::storage::store_error)?;
                rows.into_iter()
                    .map(app::audit::AuditEvent::try_from)
                    .collect()
            }
        }
    };
}

pub(super) use impl_audit_store;
