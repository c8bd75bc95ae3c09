//! PostgreSQL: the scale-out backend. Server processes are stateless and share one database;
//! commits are durable (`synchronous_commit=on`, the server default).

use app::domain::IdempotencyKey;
use app::ledger::{Changes, OperationChange};
use app::store_error::StoreError;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::written_behind::WrittenBehind;
use super::{store_error, OpenError};
use announcer::Announcer;
use group_commit::GroupCommit;
use group_read::GroupRead;
use kept_members::{Membership, BEAT, FENCES_CHANNEL};

mod announcer;
mod batches;
mod columns;
mod group_commit;
mod group_read;
mod kept_members;
mod ledger;
mod vacuum;

/// The channel operation changes are notified on.
const CHANGES_CHANNEL: &str = "idem_operations";

/// The PostgreSQL implementation of every storage port.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The group commit's connections (see `group_commit::connect_options`).
    commit_pool: PgPool,
    /// The group read's connections (see `group_read::connect_options`).
    read_pool: PgPool,
    written_behind: WrittenBehind,
    changes: Changes,
    /// Tells every process (this one too) of the changes this one commits.
    announcer: Announcer,
    /// Writes the changes that are only rows together, many per commit.
    group_commit: GroupCommit,
    /// Reads the keys and operations that decide claims and reports together.
    group_read: GroupRead,
    /// Only `idem serve`'s store keeps final outcomes in memory (as on SQLite).
    membership: Option<Arc<Membership>>,
}

impl PostgresStore {
    /// Connects for `idem serve`: as [`PostgresStore::open`], and the process keeps final
    /// outcomes in memory as a member of `kept_members` (it joins once migrated).
    pub async fn open_to_serve(url: &str) -> Result<Self, OpenError> {
        Self::connect(url, Some(Arc::new(Membership::new()))).await
    }

    /// Connects to a `postgres://` URL.
    pub async fn open(url: &str) -> Result<Self, OpenError> {
        Self::connect(url, None).await
    }

    async fn connect(url: &str, membership: Option<Arc<Membership>>) -> Result<Self, OpenError> {
        // No JIT: idem's statements are short, and on a table whose statistics are missing
        // or stale the planner's cost passes the JIT threshold and compiling took 0.3 s of a
        // dashboard read that runs in 1 ms. No parallel workers either: a week's counters,
        // thirty short index reads, took 12 ms with two workers and 5.5 ms without.
        let options = PgConnectOptions::from_str(url)
            .map_err(OpenError::Connect)?
            .options([("jit", "off"), ("max_parallel_workers_per_gather", "0")]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // While the database is down, requests wait this long for a connection before
            // they are answered 503; a healthy pool hands one out in milliseconds.
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options.clone())
            .await
            .map_err(OpenError::Connect)?;
        let commit_pool = batches_pool(
            group_commit::connect_options(options.clone()),
            group_commit::IN_FLIGHT,
        )
        .await?;
        let read_pool =
            batches_pool(group_read::connect_options(options), group_read::IN_FLIGHT).await?;
        let mut listener = PgListener::connect_with(&pool)
            .await
            .map_err(OpenError::Connect)?;
        listener
            .listen_all([CHANGES_CHANNEL, FENCES_CHANNEL])
            .await
            .map_err(OpenError::Connect)?;
        let changes = Changes::new();
        tokio::spawn(relay_changes(
            listener,
            changes.clone(),
            membership.clone(),
            pool.clone(),
        ));
        let written_behind = WrittenBehind::start(ledger::behind_sink(pool.clone()));
        let announcer = Announcer::start(pool.clone(), CHANGES_CHANNEL);
        let group_commit = GroupCommit::start(commit_pool.clone());
        let group_read = GroupRead::start(read_pool.clone());
        Ok(Self {
            pool,
            commit_pool,
            read_pool,
            written_behind,
            changes,
            announcer,
            group_commit,
            group_read,
            membership,
        })
    }

    /// Brings the schema up to date; then a serving store warns if autovacuum is kept
    /// away from the tables, and joins the members.
    pub(super) async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        sqlx::migrate!("migrations/postgres")
            .run(&self.pool)
            .await?;
        if let Some(membership) = &self.membership {
            match vacuum::Neglect::read(&self.pool).await {
                Ok(neglect) => neglect.warn(),
                Err(error) => tracing::warn!(%error, "could not read the autovacuum settings"),
            }
            if membership.start_beating() {
                tokio::spawn(beat(membership.clone(), self.pool.clone()));
            }
        }
        Ok(())
    }
}

/// A pool of its own for a kind of batch, with as many connections as it runs batches at
/// once, each connection set up by `options` for how those batches are planned.
async fn batches_pool(options: PgConnectOptions, in_flight: usize) -> Result<PgPool, OpenError> {
    PgPoolOptions::new()
        .max_connections(u32::try_from(in_flight).unwrap_or(u32::MAX))
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
        .map_err(OpenError::Connect)
}

/// Renews this process's membership every `BEAT`, until the pool closes.
async fn beat(membership: Arc<Membership>, pool: PgPool) {
    while !pool.is_closed() {
        if let Err(error) = membership.beat(&pool).await {
            if !pool.is_closed() {
                tracing::warn!(%error, "could not renew the kept-outcome membership");
            }
        }
        tokio::time::sleep(BEAT).await;
    }
}

/// Re-publishes in this process every change notified on the database, and keeps the
/// membership up to date (see `kept_members`), until the pool closes. The listener reconnects
/// by itself when the connection drops; notifications sent while it was away are lost (a
/// live view reloads what it shows; the membership forgets everything it kept).
async fn relay_changes(
    mut listener: PgListener,
    changes: Changes,
    membership: Option<Arc<Membership>>,
    pool: PgPool,
) {
    let membership = membership.as_deref();
    loop {
        match listener.try_recv().await {
            Ok(Some(notification)) => {
                if notification.channel() == FENCES_CHANNEL {
                    if let Some(membership) = membership {
                        fence_seen(membership, notification.payload(), &pool).await;
                    }
                } else {
                    relay_change(&changes, membership, notification.payload());
                }
                if let Some(membership) = membership {
                    membership.listening();
                }
            }
            Ok(None) => {
                tracing::warn!(
                    "the operation change listener reconnected; changes may have been missed"
                );
                if let Some(membership) = membership {
                    membership.listener_lost(true);
                }
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(error) => {
                tracing::warn!(%error, "lost the operation change listener; reconnecting");
                if let Some(membership) = membership {
                    membership.listener_lost(false);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// What the `operations_announce` trigger says inside a transaction that changed an
/// operation that was final, or retired one: the key whose kept outcome must be forgotten.
/// The change itself is announced after the commit, with the others.
#[derive(serde::Deserialize)]
struct Replaced {
    namespace: app::domain::Namespace,
    key: IdempotencyKey,
}

/// A notification on the changes channel: the server's array of committed changes (see
/// `announcer`), or the trigger's object naming a replaced key.
fn relay_change(changes: &Changes, membership: Option<&Membership>, payload: &str) {
    if payload.starts_with('[') {
        if !changes.is_watched() {
            return;
        }
        match serde_json::from_str::<Vec<OperationChange>>(payload) {
            Ok(announced) => announced.into_iter().for_each(|c| changes.publish(c)),
            Err(error) => tracing::warn!(%error, "ignoring malformed operation changes"),
        }
        return;
    }
    let Some(membership) = membership else {
        return;
    };
    match serde_json::from_str::<Replaced>(payload) {
        Ok(Replaced { namespace, key }) => membership.changed(&namespace, &key),
        Err(error) => {
            membership.changed_unknown();
            tracing::warn!(%error, "ignoring a malformed operation change");
        }
    }
}

async fn fence_seen(membership: &Membership, payload: &str, pool: &PgPool) {
    let Ok(fence) = payload.parse::<i64>() else {
        tracing::warn!(payload, "ignoring a malformed fence");
        return;
    };
    if let Err(error) = membership.fence_seen(fence, pool).await {
        tracing::warn!(%error, "could not acknowledge a fence");
    }
}

impl crate::storage::backend::SqlBackend for PostgresStore {
    type Db = sqlx::Postgres;

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn changes(&self) -> &Changes {
        &self.changes
    }

    fn written_behind(&self) -> &WrittenBehind {
        &self.written_behind
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        self.pool.begin().await.map_err(store_error)
    }

    async fn close(&self) {
        self.written_behind.flush().await;
        self.announcer.flush().await;
        if let Some(membership) = &self.membership {
            membership.leave(&self.pool).await;
        }
        self.group_commit.release_connections();
        self.group_read.release_connections();
        self.commit_pool.close().await;
        self.read_pool.close().await;
        self.pool.close().await;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::PostgresStore;
    use crate::storage::backend::{SqlBackend as _, SqlStore};
    use crate::storage::testing::{Backend, TestDatabase};
    use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
    use std::str::FromStr;

    /// A store on `db` with the schema in place.
    pub(crate) async fn migrated(db: &TestDatabase) -> SqlStore<PostgresStore> {
        let store = PostgresStore::open(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        SqlStore(store)
    }

    /// A pool of one connection to `db`, set up by `configure` as a pool of the store's.
    pub(crate) async fn one_connection(
        db: &TestDatabase,
        configure: fn(PgConnectOptions) -> PgConnectOptions,
    ) -> PgPool {
        let options = PgConnectOptions::from_str(db.url()).unwrap();
        PgPoolOptions::new()
            .max_connections(1)
            .connect_with(configure(options))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_store_s_connections_run_without_jit_or_parallel_workers() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (jit,): (String,) = sqlx::query_as("show jit")
            .fetch_one(store.0.reader())
            .await
            .unwrap();
        assert_eq!(jit, "off");
        let (workers,): (String,) = sqlx::query_as("show max_parallel_workers_per_gather")
            .fetch_one(store.0.reader())
            .await
            .unwrap();
        assert_eq!(workers, "0");
    }
}
