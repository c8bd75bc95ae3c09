//! Group reads on PostgreSQL: the unlocked reads that decide a claim (a key's live
//! operation) or a report (an operation by id) and that arrive together are answered by one
//! statement, each with the database's time, instead of one round trip and one statement
//! each. Under load they are half of the ledger's statements: every new key's claim reads
//! its key, and every completion its operation, before the group commit writes them.
//!
//! The statement joins the looked-up keys and ids (`unnest … with ordinality`) to
//! `operations`, so a lookup that finds nothing still gets its row and its time. A batch that
//! fails answers every lookup of it with the error; reads change nothing, so the ledger's
//! usual handling (503, the client's retry) is all it needs.

use app::domain::Namespace;
use app::ledger::Operation;
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgRow};
use sqlx::{FromRow, Row};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::batches::{self, KeptConnections, Limits};
use crate::storage::operation_rows::{OperationRow, OPERATION_COLUMNS};
use crate::storage::store_error;

/// The most lookups answered by one statement (arrays bind as one value each, so only how
/// long the last of a batch waits bounds it).
const MAX_BATCH: usize = 256;

/// How many batches may be read at once: as for the group commit, fewer make bigger batches.
pub(super) const IN_FLIGHT: usize = 2;

/// What a lookup found: the operation, if any, and the database's time when it was read.
pub(super) type Found = (Option<Operation>, DateTime<Utc>);

enum Lookup {
    /// A key's live operation.
    Key { namespace: String, key: String },
    /// An operation by id, live or not.
    Id(Uuid),
}

struct Job {
    lookup: Lookup,
    reply: oneshot::Sender<Result<Found, StoreError>>,
}

/// Queues lookups for the batches. Cheap to clone; the queue closes with the last handle.
#[derive(Clone)]
pub(super) struct GroupRead {
    queue: mpsc::UnboundedSender<Job>,
    connections: Arc<KeptConnections>,
    #[cfg_attr(not(test), allow(dead_code))]
    statements: Arc<AtomicU64>,
}

impl GroupRead {
    /// Starts gathering batches of lookups for `pool`.
    pub(super) fn start(pool: PgPool) -> Self {
        let (queue, jobs) = mpsc::unbounded_channel();
        let statements = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(KeptConnections::new(pool));
        tokio::spawn(gather(connections.clone(), jobs, statements.clone()));
        Self {
            queue,
            connections,
            statements,
        }
    }

    /// Gives the connections kept between batches back to the pool (the store is closing).
    pub(super) fn release_connections(&self) {
        self.connections.release();
    }

    /// The live operation of `key` in `namespace`, if any, and the time it was read at.
    pub(super) async fn key(&self, namespace: &Namespace, key: &str) -> Result<Found, StoreError> {
        self.find(Lookup::Key {
            namespace: namespace.as_str().to_owned(),
            key: key.to_owned(),
        })
        .await
    }

    /// The operation `id`, if any, and the time it was read at.
    pub(super) async fn by_id(&self, id: Uuid) -> Result<Found, StoreError> {
        self.find(Lookup::Id(id)).await
    }

    async fn find(&self, lookup: Lookup) -> Result<Found, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job { lookup, reply })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Statements run so far (fewer than lookups, under load).
    #[cfg(test)]
    pub(super) fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the PostgreSQL group read has stopped".into())
}

/// The group read's connections plan each statement for the lookups at hand
/// (`force_custom_plan`). A plan kept for every run (which PostgreSQL's default settles on
/// after five) is made from the table as it was then, and a key's lookup ties on a small
/// table between the live keys' unique index and `operations_newest` (every operation of
/// the namespace, then filtered by key); kept, the latter read thousands of rows per lookup
/// once the table grew. A plan made at each run sees the table as it is.
pub(super) fn connect_options(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("plan_cache_mode", "force_custom_plan")])
}

/// Answers what queued on `jobs` in batches, until every handle is gone.
async fn gather(
    connections: Arc<KeptConnections>,
    jobs: mpsc::UnboundedReceiver<Job>,
    statements: Arc<AtomicU64>,
) {
    let limits = Limits {
        in_flight: IN_FLIGHT,
        max_jobs: MAX_BATCH,
        max_weight: MAX_BATCH,
        weight: |_: &Job| 1,
    };
    batches::gather(jobs, limits, move |batch| {
        let (connections, statements) = (connections.clone(), statements.clone());
        async move {
            let found = match batch.as_slice() {
                [alone] => read_one(&connections, &alone.lookup)
                    .await
                    .map(|found| vec![found]),
                _ => {
                    let lookups: Vec<&Lookup> = batch.iter().map(|job| &job.lookup).collect();
                    read_batch(&connections, &lookups).await
                }
            };
            statements.fetch_add(1, Ordering::Relaxed);
            answer(batch, found);
        }
    })
    .await;
}

/// Sends each job its answer: what the batch found for it, or the batch's error.
fn answer(batch: Vec<Job>, found: Result<Vec<Result<Found, StoreError>>, StoreError>) {
    match found {
        Ok(found) => {
            for (job, found) in batch.into_iter().zip(found) {
                let _ = job.reply.send(found);
            }
        }
        Err(error) => {
            for job in batch {
                let _ = job.reply.send(Err(error.repeated()));
            }
        }
    }
}

/// A lookup alone in its batch (the usual case under light load) is read by a statement of
/// its own, one index probe, where the batch's statement unpacks two arrays and joins both.
async fn read_one(
    connections: &KeptConnections,
    lookup: &Lookup,
) -> Result<Result<Found, StoreError>, StoreError> {
    let mut connection = connections.take().await.map_err(store_error)?;
    let clock = "from (select clock_timestamp() as read_at) as clock left join operations";
    let row = match lookup {
        Lookup::Key { namespace, key } => {
            let sql = format!(
                "select {OPERATION_COLUMNS}, read_at {clock} \
                 on namespace = $1 and key = $2 and retired_at is null"
            );
            sqlx::query(&sql)
                .bind(namespace.as_str())
                .bind(key.as_str())
                .fetch_one(&mut *connection)
                .await
        }
        Lookup::Id(id) => {
            let sql = format!("select {OPERATION_COLUMNS}, read_at {clock} on id = $1");
            sqlx::query(&sql)
                .bind(*id)
                .fetch_one(&mut *connection)
                .await
        }
    }
    .map_err(store_error)?;
    connections.keep(connection);
    Ok(found_in(&row))
}

/// Runs a batch's statement: what each lookup found, in the batch's order.
async fn read_batch(
    connections: &KeptConnections,
    lookups: &[&Lookup],
) -> Result<Vec<Result<Found, StoreError>>, StoreError> {
    let (mut namespaces, mut keys, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    // Where each key lookup and each id lookup sits in `lookups`.
    let (mut by_key, mut by_id) = (Vec::new(), Vec::new());
    for (place, lookup) in lookups.iter().enumerate() {
        match lookup {
            Lookup::Key { namespace, key } => {
                namespaces.push(namespace.as_str());
                keys.push(key.as_str());
                by_key.push(place);
            }
            Lookup::Id(id) => {
                ids.push(*id);
                by_id.push(place);
            }
        }
    }
    // Each lookup is its own `lateral … limit 1` subquery, which PostgreSQL cannot turn into
    // a join: a join's plan may hash every live operation (it did, from statistics taken
    // while the table was small), where a lookup is one index probe.
    let sql = format!(
        "select k.n, false as by_id, o.*, clock_timestamp() as read_at \
         from unnest($1::text[], $2::text[]) with ordinality as k (namespace, key, n) \
         left join lateral (select {OPERATION_COLUMNS} from operations \
         where namespace = k.namespace and key = k.key and retired_at is null limit 1) as o on true \
         union all \
         select i.n, true, o.*, clock_timestamp() \
         from unnest($3::uuid[]) with ordinality as i (id, n) \
         left join lateral (select {OPERATION_COLUMNS} from operations \
         where id = i.id limit 1) as o on true"
    );
    let mut connection = connections.take().await.map_err(store_error)?;
    let rows = sqlx::query(&sql)
        .bind(namespaces)
        .bind(keys)
        .bind(ids)
        .fetch_all(&mut *connection)
        .await
        .map_err(store_error)?;
    connections.keep(connection);
    let mut found: Vec<Option<Result<Found, StoreError>>> = lookups.iter().map(|_| None).collect();
    for row in rows {
        let n: i64 = row.try_get("n").map_err(store_error)?;
        let by: bool = row.try_get("by_id").map_err(store_error)?;
        let places = if by { &by_id } else { &by_key };
        let place = usize::try_from(n - 1)
            .ok()
            .and_then(|n| places.get(n))
            .ok_or_else(|| StoreError::Corrupt(format!("a group read answered lookup {n}")))?;
        found[*place] = Some(found_in(&row));
    }
    found
        .into_iter()
        .map(|found| {
            found.ok_or_else(|| StoreError::Corrupt("a group read skipped a lookup".into()))
        })
        .collect()
}

/// The operation (none when the join found no row) and time of one row of the statement.
fn found_in(row: &PgRow) -> Result<Found, StoreError> {
    let read_at: DateTime<Utc> = row.try_get("read_at").map_err(store_error)?;
    let id: Option<Uuid> = row.try_get("id").map_err(store_error)?;
    let operation = match id {
        Some(_) => Some(Operation::try_from(
            OperationRow::from_row(row).map_err(store_error)?,
        )?),
        None => None,
    };
    Ok((operation, read_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::backend::SqlBackend as _;
    use crate::storage::conformance::ledger::{request, start};
    use crate::storage::postgres::tests::{migrated, one_connection};
    use crate::storage::testing::{Backend, TestDatabase};
    use futures_util::future::join_all;

    /// Key and id lookups sent together are answered by one statement, each with what it
    /// looked up: a live key, a key twice, a key with no operation, an id, an unknown id.
    #[tokio::test]
    async fn lookups_sent_together_share_one_statement_and_each_gets_its_own_answer() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (first, _) = start(&store, &request("billing", "order-1", "refund")).await;
        let (second, _) = start(&store, &request("billing", "order-2", "refund")).await;
        let billing = first.namespace.clone();
        let other = Namespace::try_from("other").unwrap();
        let group = &store.0.group_read;
        let statements = group.statements();

        let key = |namespace: &Namespace, key: &str| Lookup::Key {
            namespace: namespace.as_str().to_owned(),
            key: key.to_owned(),
        };
        let lookups = [
            key(&billing, "order-2"),
            Lookup::Id(first.id),
            key(&billing, "order-9"),
            key(&other, "order-1"),
            Lookup::Id(Uuid::now_v7()),
            key(&billing, "order-1"),
            key(&billing, "order-2"),
        ];
        let found = join_all(lookups.into_iter().map(|lookup| group.find(lookup))).await;

        assert_eq!(
            group.statements() - statements,
            1,
            "one statement for seven lookups"
        );
        let found: Vec<Option<Uuid>> = found
            .into_iter()
            .map(|found| {
                let (operation, read_at) = found.unwrap();
                if let Some(operation) = &operation {
                    assert!(
                        read_at >= operation.updated_at,
                        "read after its last change"
                    );
                }
                operation.map(|operation| operation.id)
            })
            .collect();
        assert_eq!(
            found,
            [
                Some(second.id),
                Some(first.id),
                None,
                None,
                None,
                Some(first.id),
                Some(second.id)
            ]
        );
        store.0.close().await;
    }

    /// Lookups one after another are each alone in their batch, read by a statement of
    /// their own, with the same answers.
    #[tokio::test]
    async fn a_lookup_alone_is_answered_as_in_a_batch() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (live, _) = start(&store, &request("billing", "order-1", "refund")).await;
        let group = &store.0.group_read;
        let statements = group.statements();

        let (by_key, read_at) = group.key(&live.namespace, "order-1").await.unwrap();
        let (by_id, _) = group.by_id(live.id).await.unwrap();
        let (no_key, _) = group.key(&live.namespace, "order-2").await.unwrap();
        let (no_id, _) = group.by_id(Uuid::now_v7()).await.unwrap();

        assert_eq!(group.statements() - statements, 4, "one statement each");
        assert_eq!(by_key.as_ref(), Some(&live));
        assert_eq!(by_id.as_ref(), Some(&live));
        assert!(read_at >= live.updated_at, "read after its last change");
        assert_eq!((no_key, no_id), (None, None));
        store.0.close().await;
    }

    /// The batch's statement ran many times while the table was small (where a key's
    /// lookup is as cheap through `operations_newest` as through the live keys' index); once
    /// the table has grown, its key lookups go through the live keys' index.
    #[tokio::test]
    async fn a_key_s_lookup_is_planned_for_the_table_as_it_is_now() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let (live, _) = start(&store, &request("billing", "order-1", "refund")).await;
        let pool = one_connection(&db, connect_options).await;
        let group = GroupRead::start(pool.clone());
        // Batches of more lookups than PostgreSQL's generic plan assumes (ten per array), so
        // that its default would keep the generic plan.
        let keys: Vec<String> = (1..=30).map(|n| format!("order-{n}")).collect();
        for _ in 0..10 {
            let found = join_all(keys.iter().map(|key| group.key(&live.namespace, key))).await;
            assert!(found[0].as_ref().unwrap().0.is_some());
        }
        // The group keeps the pool's one connection; the queries below need it back.
        group.release_connections();

        sqlx::query(
            "insert into operations (id, namespace, key, key_source, tool, effect, fingerprint, \
             provider_key, args, status, attempt, created_at, updated_at, expires_at) \
             select gen_random_uuid(), 'billing', 'k-' || n, 'body', 'refund', \
             'idempotent_write', 'f', 'p', '{}', 'succeeded', 1, now(), now(), \
             now() + interval '1 day' from generate_series(1, 20000) as n",
        )
        .execute(&store.0.pool)
        .await
        .unwrap();
        let name: String = sqlx::query_scalar(
            "select name from pg_prepared_statements where statement like '%with ordinality%'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(&format!(
            "explain execute {name}('{{billing,billing}}', '{{k-1,k-2}}', '{{}}')"
        ))
        .fetch_all(&pool)
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains("operations_live_key"), "{plan}");
        assert!(!plan.contains("operations_newest"), "{plan}");
        pool.close().await;
        store.0.close().await;
    }

    /// A batch that fails (here: on a closed pool) answers every one of its lookups with the
    /// error, and later lookups are answered too.
    #[tokio::test]
    async fn a_failed_batch_answers_every_lookup_with_its_error() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let billing = Namespace::try_from("billing").unwrap();
        let group = store.0.group_read.clone();
        store.0.read_pool.close().await;

        let found = join_all((0..5).map(|i| {
            let (group, billing) = (group.clone(), billing.clone());
            async move { group.key(&billing, &format!("k-{i}")).await }
        }))
        .await;

        assert_eq!(found.len(), 5);
        for answer in found {
            assert!(
                matches!(
                    answer,
                    Err(StoreError::Unavailable(_) | StoreError::Backend(_))
                ),
                "{answer:?}"
            );
        }
        store.0.close().await;
    }
}
