//! The sequential SQLite floor of issue #7: idem's claim (the operation row and its event,
//! one transaction) and completion (the guarded update and its event, a second one) as
//! plain SQL through rusqlite on one connection, one pair after another, in WAL with
//! `synchronous=FULL`. Each commit waits for its own fsync, so this is the most a writer
//! without group commit could do on this disk; measuring it in the same run makes issue #7's
//! "≥ 2× the sequential rusqlite floor" a ratio of one machine's minutes.
//!
//! A claim and its completion are two transactions because the tool's side effect happens
//! between them: no client could commit both at once.

use async_trait::async_trait;
use chrono::{SecondsFormat, Utc};
use rusqlite::{params, Connection};
use std::path::Path;
use std::sync::Mutex;
use uuid::Uuid;

use super::runner::{StepError, Workload};

/// The operation's row as idem writes a new key's claim (`src/storage/ledger_sql.rs`), with
/// the values the pgbench floor uses.
const INSERT_OPERATION: &str = "insert into operations (id, namespace, key, key_source, tool, \
     effect, fingerprint, provider_key, args, status, attempt, lease_token, lease_expires_at, \
     created_at, updated_at, expires_at, runner, ttl_seconds) \
     values (?1, 'bench', ?2, 'body', 'bench.charge', 'non_idempotent_write', \
     'b5f3c0e0a1d94e7c8f2a6b1c3d5e7f90b5f3c0e0a1d94e7c8f2a6b1c3d5e7f90', ?5, \
     '{\"amount_cents\":500}', 'pending', 1, ?3, ?4, ?4, ?4, ?4, 'agent', 86400)";

const INSERT_EVENT: &str =
    "insert into operation_events (operation_id, at, kind, actor, detail) values (?1, ?2, ?3, \
     'agent:bench/sequential', ?4)";

const COMPLETE_OPERATION: &str = "update operations set status = 'succeeded', \
     result = '{\"ok\":true}', lease_token = null, lease_expires_at = null, updated_at = ?2, \
     completed_at = ?2, expires_at = ?2 where id = ?1 and status = 'pending'";

/// One rusqlite connection to a database idem has migrated.
pub struct SequentialSqlite {
    connection: Mutex<Connection>,
    /// Unique per run, so keys never meet earlier runs' keys.
    prefix: String,
}

impl SequentialSqlite {
    /// Opens the migrated database file with idem's settings for durability.
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        Ok(Self {
            connection: Mutex::new(open_durable(path)?),
            prefix: Uuid::new_v4().simple().to_string(),
        })
    }

    /// One claim, committed, then its completion, committed.
    fn pair(&self, task: usize, seq: u64) -> rusqlite::Result<()> {
        let mut connection = self.connection.lock().expect("the floor's connection");
        let id = Uuid::now_v7();
        let claim = connection.transaction()?;
        write_claim(&claim, id, &format!("{}-{task}-{seq}", self.prefix))?;
        claim.commit()?;
        let complete = connection.transaction()?;
        write_completion(&complete, id)?;
        complete.commit()
    }
}

/// Opens a database file idem migrated, with idem's settings for durability.
pub(super) fn open_durable(path: &Path) -> rusqlite::Result<Connection> {
    let connection = Connection::open(path)?;
    connection.pragma_update(None, "journal_mode", "wal")?;
    connection.pragma_update(None, "synchronous", "full")?;
    connection.pragma_update(None, "foreign_keys", "on")?;
    Ok(connection)
}

/// The rows of a new key's claim: the operation, pending, and its `claimed` event.
pub(super) fn write_claim(
    tx: &rusqlite::Transaction<'_>,
    id: Uuid,
    key: &str,
) -> rusqlite::Result<()> {
    let claimed_at = now();
    let lease = app::ledger::LeaseTokenHash::of(&Uuid::new_v4().simple().to_string());
    let provider_key = app::ledger::provider_key_of(id);
    tx.prepare_cached(INSERT_OPERATION)?.execute(params![
        id.as_bytes(),
        key,
        lease.as_str(),
        claimed_at,
        provider_key
    ])?;
    insert_event(tx, id, &claimed_at, "claimed", CLAIMED_DETAIL)?;
    Ok(())
}

/// The rows of its completion: the guarded update to `succeeded` and the `completed` event.
pub(super) fn write_completion(tx: &rusqlite::Transaction<'_>, id: Uuid) -> rusqlite::Result<()> {
    let completed_at = now();
    let updated = tx
        .prepare_cached(COMPLETE_OPERATION)?
        .execute(params![id.as_bytes(), completed_at])?;
    if updated != 1 {
        return Err(rusqlite::Error::StatementChangedRows(updated));
    }
    insert_event(tx, id, &completed_at, "completed", COMPLETED_DETAIL)?;
    Ok(())
}

const CLAIMED_DETAIL: &str = r#"{"attempt":1,"key_source":"body","effect":"non_idempotent_write"}"#;
const COMPLETED_DETAIL: &str =
    r#"{"status":"succeeded","retryable":false,"provider_ref":null,"attempt":1}"#;

fn insert_event(
    tx: &rusqlite::Transaction<'_>,
    id: Uuid,
    at: &str,
    kind: &str,
    detail: &str,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(INSERT_EVENT)?
        .execute(params![id.as_bytes(), at, kind, detail])
}

/// The time as idem stores it: RFC 3339 in UTC.
fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, false)
}

#[async_trait]
impl Workload for SequentialSqlite {
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError> {
        // rusqlite blocks; the floor runs as one task, so it may hold its worker thread.
        tokio::task::block_in_place(|| self.pair(task, seq))
            .map_err(|e| StepError::Outcome(e.to_string()))
    }
}
