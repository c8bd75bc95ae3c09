//! The databases behind the ports of `app`: SQLite (embedded default) and PostgreSQL
//! (scale-out). Both implement the same traits and pass one conformance suite.

mod audit_sql;
mod backend;
mod dialect;
mod identity_sql;
mod kept_rows;
mod ledger_sql;
mod metrics_sql;
mod operation_rows;
mod postgres;
mod push_sql;
mod retention_sql;
mod rollup_sql;
mod rows;
mod sqlite;
pub mod survey;
// Public only for the integration tests and the bench, which are crates of their own; not
// part of what idem offers.
#[doc(hidden)]
pub mod testing;
mod tool_counts_sql;
mod unknown_spans_sql;
mod written_behind;

#[cfg(test)]
pub(crate) mod conformance;

use app::audit::AuditStore;
use app::identity::IdentityStore;
use app::ledger::metrics::MetricsStore;
use app::ledger::{Changes, LedgerStore};
use app::store_error::StoreError;
use std::sync::Arc;

use backend::{SqlStore, Upkeep};
use ledger_sql::LedgerBackend;

pub use postgres::PostgresStore;
pub use retention_sql::{Purged, RetentionRound};
pub use sqlite::SqliteStore;

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("cannot connect to the database: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("cannot migrate the database: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    #[error(
        "another idem server is serving this SQLite file (it holds {}); one server per \
         SQLite file: several servers need PostgreSQL",
        .0.display()
    )]
    ServedElsewhere(std::path::PathBuf),
    #[error("cannot lock {}: {source}", .path.display())]
    Lock {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the SQLite writer's thread: {0}")]
    Writer(#[source] std::io::Error),
}

/// An open, migrated database of either kind, as the ports the server uses.
#[derive(Clone)]
pub struct Database {
    identity: Arc<dyn IdentityStore>,
    audit: Arc<dyn AuditStore>,
    ledger: Arc<dyn LedgerStore>,
    metrics: Arc<dyn MetricsStore>,
    upkeep: Arc<dyn Upkeep>,
    changes: Changes,
}

impl Database {
    /// Opens the database named by the URL's scheme and brings its schema up to date.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        Self::open_as(url, false).await
    }

    /// Opens the database for `idem serve`: as [`Database::open`], and the store keeps final
    /// outcomes in memory. A SQLite file is held for this process alone (a second server on it
    /// is refused); on PostgreSQL the process joins the others that keep outcomes (see
    /// `postgres::kept_members`). The command line's other commands may still open it.
    pub async fn open_to_serve(url: &str) -> Result<Self, OpenError> {
        Self::open_as(url, true).await
    }

    async fn open_as(url: &str, serving: bool) -> Result<Self, OpenError> {
        if url.starts_with("sqlite:") {
            let store = if serving {
                SqliteStore::open_to_serve(url).await?
            } else {
                SqliteStore::open(url).await?
            };
            store.migrate().await.map_err(OpenError::Migrate)?;
            Ok(Self::of(store))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let store = if serving {
                PostgresStore::open_to_serve(url).await?
            } else {
                PostgresStore::open(url).await?
            };
            store.migrate().await.map_err(OpenError::Migrate)?;
            Ok(Self::of(store))
        } else {
            Err(OpenError::UnsupportedUrl(url.to_owned()))
        }
    }

    fn of<B: LedgerBackend>(store: B) -> Self {
        let changes = store.changes().clone();
        let store = Arc::new(SqlStore(store));
        Database {
            identity: store.clone(),
            audit: store.clone(),
            ledger: store.clone(),
            metrics: store.clone(),
            upkeep: store,
            changes,
        }
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.upkeep.ping().await
    }

    /// The database's own background tasks that are down now (for `/readyz`): on SQLite,
    /// the writer between a panic and its restart.
    pub fn tasks_down(&self) -> Vec<&'static str> {
        self.upkeep.tasks_down()
    }

    /// The identity port.
    pub fn identity_store(&self) -> Arc<dyn IdentityStore> {
        self.identity.clone()
    }

    /// The audit port.
    pub fn audit_store(&self) -> Arc<dyn AuditStore> {
        self.audit.clone()
    }

    /// The ledger port.
    pub fn ledger_store(&self) -> Arc<dyn LedgerStore> {
        self.ledger.clone()
    }

    /// The stream of operation changes (on PostgreSQL, of every process).
    pub fn changes(&self) -> &Changes {
        &self.changes
    }

    /// The metrics port.
    pub fn metrics_store(&self) -> Arc<dyn MetricsStore> {
        self.metrics.clone()
    }

    /// One retention round (see `retention_sql`): deletes a small batch of long-expired
    /// operations with their events, and of expired sessions.
    pub async fn purge_round(&self, round: &RetentionRound) -> Result<Purged, StoreError> {
        self.upkeep.purge_round(round).await
    }

    /// Marks the database as the demo's unless it holds something already (see `survey`);
    /// answers whether it is the demo's.
    pub async fn claim_for_demo(&self) -> Result<bool, StoreError> {
        self.upkeep.claim_for_demo().await
    }

    /// Closes every connection (after the server has drained).
    pub async fn close(&self) {
        self.upkeep.close().await
    }
}

/// A change being staged in a write transaction: it yields the caller's answer and the
/// operation changes to publish once the transaction commits.
pub(crate) type Staging<'c, T> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<(T, Vec<app::ledger::OperationChange>), StoreError>>
            + Send
            + 'c,
    >,
>;

/// Translates a driver error at the storage boundary: uniqueness violations become
/// `Conflict`, a database out of reach `Unavailable`, the rest are backend failures.
pub(crate) fn store_error(error: sqlx::Error) -> StoreError {
    match error.as_database_error() {
        Some(db) if db.is_unique_violation() => StoreError::Conflict,
        _ if is_out_of_reach(&error) => StoreError::Unavailable(Box::new(error)),
        _ => StoreError::Backend(Box::new(error)),
    }
}

/// Whether `error` says the database cannot be reached for now, rather than that it refused
/// this request: a lost or refused connection, an exhausted pool, a server shutting down or
/// starting up, a database busy past its timeout, a full or failing disk.
fn is_out_of_reach(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_unavailable_code(&code)),
        _ => false,
    }
}

/// PostgreSQL's SQLSTATEs of a connection problem (class 08), of a server shutting down or
/// not yet up (57P01–57P03) and of too many connections (53300); SQLite's primary result
/// codes (the low byte of an extended code) for busy, locked, I/O error, full and cannot open.
fn is_unavailable_code(code: &str) -> bool {
    if code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300") {
        return true;
    }
    code.parse::<i32>()
        .is_ok_and(|extended| sqlite_code_is_unavailable(extended & 0xff))
}

/// SQLite's primary result codes that say "not now" rather than "not this".
pub(crate) fn sqlite_code_is_unavailable(primary: i32) -> bool {
    use rusqlite::ffi;
    matches!(
        primary,
        ffi::SQLITE_BUSY
            | ffi::SQLITE_LOCKED
            | ffi::SQLITE_IOERR
            | ffi::SQLITE_FULL
            | ffi::SQLITE_CANTOPEN
    )
}
