//! Writes a [`SeedPlan`] into a fresh database: multi-row inserts, many per transaction,
//! with the same column encodings as the store (sqlx binds the same Rust types).

use sqlx::types::Json;
use sqlx::{PgPool, Postgres, QueryBuilder, Sqlite, SqlitePool};
use std::time::Instant;

use super::seed::{SeedOperation, SeedPlan};

/// Operations per multi-row insert: 19 bound values each stays under SQLite's 32 766.
const OPERATIONS_PER_STATEMENT: usize = 1_000;
/// Events per multi-row insert (4 bound values each).
const EVENTS_PER_STATEMENT: usize = 4_000;
/// Operations per transaction: few commits, and SQLite's WAL stays small.
const OPERATIONS_PER_TRANSACTION: u64 = 50_000;

const OPERATIONS_INSERT: &str =
    "insert into operations (id, namespace, key, key_source, tool, effect, \
    fingerprint, provider_key, args, run_id, step, status, attempt, result, error, retryable, \
    provider_ref, created_at, updated_at, completed_at, expires_at, runner, unknown_since) ";
const SQLITE_TOOL_COUNTS: &str =
    include_str!("../../../migrations/sqlite/20261207000000_tool_counts_as_written.sql");
const POSTGRES_TOOL_COUNTS: &str =
    include_str!("../../../migrations/postgres/20261207000000_tool_counts_as_written.sql");

const EVENTS_INSERT: &str = "insert into operation_events (operation_id, at, kind, actor, detail) ";

/// The inserts for one backend; the SQL text is the same on both.
macro_rules! seed_backend {
    ($name:ident, $db:ty) => {
        /// Inserts one statement's worth of operations, then their events.
        async fn $name(
            tx: &mut sqlx::Transaction<'static, $db>,
            operations: &[SeedOperation],
        ) -> Result<(), sqlx::Error> {
            let mut insert = QueryBuilder::<$db>::new(OPERATIONS_INSERT);
            insert.push_values(operations, |mut row, op| {
                row.push_bind(op.id)
                    .push_bind(op.namespace)
                    .push_bind(op.key.as_str())
                    .push("'body'")
                    .push_bind(op.tool)
                    .push_bind(op.effect)
                    .push_bind(op.fingerprint.as_str())
                    .push_bind(app::ledger::provider_key_of(op.id))
                    .push_bind(Json(&op.args))
                    .push_bind(op.run_id.as_str())
                    .push_bind(op.step)
                    .push_bind(op.status.as_str())
                    .push("1")
                    .push_bind(op.result.as_ref().map(Json))
                    .push_bind(op.error.as_ref().map(Json))
                    .push("false")
                    .push_bind(op.provider_ref.as_deref())
                    .push_bind(op.created_at)
                    .push_bind(op.updated_at)
                    .push_bind(op.completed_at)
                    .push_bind(op.expires_at)
                    .push("'agent'")
                    .push_bind(op.unknown_since);
            });
            insert.build().execute(&mut **tx).await?;
            let events: Vec<_> = operations
                .iter()
                .flat_map(|op| op.events.iter().map(move |event| (op.id, event)))
                .collect();
            for chunk in events.chunks(EVENTS_PER_STATEMENT) {
                let mut insert = QueryBuilder::<$db>::new(EVENTS_INSERT);
                insert.push_values(chunk, |mut row, (id, event)| {
                    row.push_bind(*id)
                        .push_bind(event.at)
                        .push_bind(event.kind)
                        .push("'agent:seed'")
                        .push_bind(Json(&event.detail));
                });
                insert.build().execute(&mut **tx).await?;
            }
            Ok(())
        }
    };
}

seed_backend!(insert_sqlite, Sqlite);
seed_backend!(insert_postgres, Postgres);

/// A pool to seed through.
pub enum SeedPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl SeedPool {
    /// Inserts the operations and their events in one transaction.
    async fn insert(&self, operations: &[SeedOperation]) -> Result<(), sqlx::Error> {
        let chunks = operations.chunks(OPERATIONS_PER_STATEMENT);
        match self {
            SeedPool::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in chunks {
                    insert_sqlite(&mut tx, chunk).await?;
                }
                tx.commit().await
            }
            SeedPool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in chunks {
                    insert_postgres(&mut tx, chunk).await?;
                }
                tx.commit().await
            }
        }
    }
}

impl SeedPool {
    /// Moves the metrics' roll-up watermark back to `minute`, so the next roll-ups fold
    /// the seeded events.
    pub async fn rewind_rollup(&self, minute: i64) -> Result<(), sqlx::Error> {
        let sql = "update metrics_rollup set rolled_until = $1 where name = 'event_minutes'";
        match self {
            SeedPool::Sqlite(pool) => {
                sqlx::query(sql).bind(minute).execute(pool).await?;
            }
            SeedPool::Postgres(pool) => {
                sqlx::query(sql).bind(minute).execute(pool).await?;
            }
        }
        Ok(())
    }

    /// Counts the seeded events into the table by tool (`tool_minutes`, `tool_hours`), as the
    /// server counts decisions while they commit: the migration that brought those counts does
    /// exactly that for the minutes from the roll-up's watermark on (see [`Self::rewind_rollup`]).
    pub async fn count_tools(&self) -> Result<(), sqlx::Error> {
        match self {
            SeedPool::Sqlite(pool) => {
                sqlx::raw_sql(SQLITE_TOOL_COUNTS).execute(pool).await?;
            }
            SeedPool::Postgres(pool) => {
                sqlx::raw_sql(POSTGRES_TOOL_COUNTS).execute(pool).await?;
            }
        }
        Ok(())
    }

    pub async fn close(&self) {
        match self {
            SeedPool::Sqlite(pool) => pool.close().await,
            SeedPool::Postgres(pool) => pool.close().await,
        }
    }
}

/// Writes every operation of the plan, printing progress; returns the seconds it took.
pub async fn write(pool: &SeedPool, plan: &SeedPlan, label: &str) -> Result<f64, sqlx::Error> {
    let started = Instant::now();
    let mut next = 0;
    while next < plan.count {
        let end = (next + OPERATIONS_PER_TRANSACTION).min(plan.count);
        let operations: Vec<SeedOperation> = (next..end).map(|i| plan.operation(i)).collect();
        pool.insert(&operations).await?;
        next = end;
        eprintln!(
            "  seeded {next}/{} operations ({label}, {:.0} s)",
            plan.count,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(started.elapsed().as_secs_f64())
}
