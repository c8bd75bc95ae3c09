//! The metrics' SQL and its `MetricsStore` implementation, written once for both databases.
//!
//! The statements are the same text on SQLite and PostgreSQL; what differs is passed in: the
//! SQL expression of an event's unix minute (`minute`, over `e.at`), the row lock of the
//! roll-up watermark, and — as for the ledger — `begin_write` and `now` from the backend
//! module. Buckets are numbered in SQL from the newest back
//! (`(end_minute - 1 - minute) / bucket_minutes`), so a query returns one row per bucket and
//! kind, not one per event or minute.

use app::ledger::metrics::COUNTED_KINDS;
use std::sync::LazyLock;

/// `'replayed', 'in_flight_rejected', …`: the kinds the counters are made of.
pub static COUNTED_KIND_LIST: LazyLock<String> = LazyLock::new(|| {
    COUNTED_KINDS
        .iter()
        .map(|kind| format!("'{}'", kind.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
});

/// Counts per bucket and kind from the folded minutes in `[$3, $4)`.
pub const FOLDED_COUNTS: &str = r#"select ($1 - 1 - bucket) / $2 as back, kind, cast(sum(count) as bigint) as count
    from event_minutes
    where bucket >= $3 and bucket < $4 and ($5 is null or namespace = $5)
    group by 1, 2"#;

/// Counts per bucket and kind from the events not folded yet (`at >= $3`).
pub fn raw_counts(minute: &str) -> String {
    format!(
        "select ($1 - 1 - {minute}) / $2 as back, e.kind, count(*) as count \
         from operation_events e join operations o on o.id = e.operation_id \
         where e.kind in ({kinds}) and e.at >= $3 and ($4 is null or o.namespace = $4) \
         group by 1, 2",
        kinds = *COUNTED_KIND_LIST
    )
}

/// Folds the counted events of `[$1, $2)` into per-minute counts.
pub fn fold(minute: &str) -> String {
    format!(
        "insert into event_minutes (bucket, namespace, kind, count) \
         select {minute}, o.namespace, e.kind, count(*) \
         from operation_events e join operations o on o.id = e.operation_id \
         where e.kind in ({kinds}) and e.at >= $1 and e.at < $2 \
         group by 1, 2, 3",
        kinds = *COUNTED_KIND_LIST
    )
}

/// The `reconciled` events since `$1`, with their detail (which carries `unknown_for_ms`).
pub const RECONCILED: &str = r#"select e.at, e.detail
    from operation_events e join operations o on o.id = e.operation_id
    where e.kind = 'reconciled' and e.at >= $1 and ($2 is null or o.namespace = $2)"#;

/// Live operations `unknown` or `awaiting_approval`, and how many were last updated before
/// `$1` (stuck).
pub const GAUGES: &str = r#"select status, count(*) as count,
        cast(coalesce(sum(case when updated_at < $1 then 1 else 0 end), 0) as bigint) as stuck
    from operations
    where retired_at is null and status in ('unknown', 'awaiting_approval') and ($2 is null or namespace = $2)
    group by status"#;

/// Implements `MetricsStore` for a backend store. Expects in scope: `begin_write(&self)` on
/// the store and `async fn now(&mut $conn) -> Result<DateTime<Utc>, StoreError>`.
macro_rules! impl_metrics_store {
    (store: $store:ident, conn: $conn:ty, minute: $minute:literal, lock: $lock:literal, reader: $reader:ident) => {
        async fn watermark(conn: &mut $conn, lock: &str) -> Result<Option<i64>, StoreError> {
            let sql = format!(
                "select rolled_until from metrics_rollup where name = 'event_minutes'{lock}"
            );
            let row: Option<(i64,)> = sqlx::query_as(&sql)
                .fetch_optional(conn)
                .await
                .map_err(store_error)?;
            Ok(row.map(|(minute,)| minute))
        }

        async fn gauges(
            conn: &mut $conn,
            plan: &SeriesPlan,
            namespace: &Option<String>,
        ) -> Result<Gauges, StoreError> {
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(GAUGES)
                .bind(plan.stuck_before)
                .bind(namespace)
                .fetch_all(conn)
                .await
                .map_err(store_error)?;
            let mut gauges = Gauges::default();
            for (status, count, stuck) in rows {
                let count = u64::try_from(count).unwrap_or(0);
                if status == "unknown" {
                    gauges.unknown_now = count;
                    gauges.stuck_unknown = u64::try_from(stuck).unwrap_or(0);
                } else {
                    gauges.awaiting_approval = count;
                }
            }
            Ok(gauges)
        }

        #[async_trait::async_trait]
        impl MetricsStore for $store {
            async fn metrics(
                &self,
                namespace: Option<&Namespace>,
                window: &MetricsWindow,
            ) -> Result<MetricsReport, StoreError> {
                // Replays and refused duplicates are counted: see this process's so far.
                self.quiet_events.flush().await;
                let mut conn = self.$reader.acquire().await.map_err(store_error)?;
                let plan = SeriesPlan::new(window.clone(), now(&mut conn).await?);
                let namespace = namespace.map(|n| n.to_string());
                // Minutes before the watermark are folded; the rest are read from the events.
                // Retention deletes only events of folded minutes, so a fold or a deletion
                // that commits meanwhile changes nothing.
                let split = watermark(&mut conn, "")
                    .await?
                    .unwrap_or(i64::MIN)
                    .clamp(plan.start_minute, plan.end_minute);
                let folded: Vec<(i64, String, i64)> = sqlx::query_as(FOLDED_COUNTS)
                    .bind(plan.end_minute)
                    .bind(plan.bucket_minutes)
                    .bind(plan.start_minute)
                    .bind(split)
                    .bind(&namespace)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(store_error)?;
                let raw: Vec<(i64, String, i64)> = sqlx::query_as(&raw_counts($minute))
                    .bind(plan.end_minute)
                    .bind(plan.bucket_minutes)
                    .bind(minute_start(split))
                    .bind(&namespace)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(store_error)?;
                let counts: Vec<KindCount> = folded
                    .into_iter()
                    .chain(raw)
                    .map(|(back, kind, count)| KindCount { back, kind, count })
                    .collect();
                let reconciled: Vec<(DateTime<Utc>, Json<Value>)> = sqlx::query_as(RECONCILED)
                    .bind(plan.from())
                    .bind(&namespace)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(store_error)?;
                let samples: Vec<ReconciledSample> = reconciled
                    .into_iter()
                    .map(|(at, detail)| ReconciledSample {
                        at,
                        unknown_for_ms: detail.0["unknown_for_ms"].as_u64(),
                    })
                    .collect();
                let gauges = gauges(&mut conn, &plan, &namespace).await?;
                Ok(assemble(&plan, &counts, &samples, gauges))
            }

            async fn roll_up(&self) -> Result<u64, StoreError> {
                self.quiet_events.flush().await;
                let mut tx = self.begin_write().await?;
                let now = now(&mut tx).await?;
                let range = watermark(&mut tx, $lock)
                    .await?
                    .and_then(|from| next_rollup(from, now));
                let Some(range) = range else {
                    tx.rollback().await.map_err(store_error)?;
                    return Ok(0);
                };
                sqlx::query(&fold($minute))
                    .bind(minute_start(range.start))
                    .bind(minute_start(range.end))
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                sqlx::query(
                    "update metrics_rollup set rolled_until = $1 where name = 'event_minutes'",
                )
                .bind(range.end)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok((range.end - range.start).unsigned_abs())
            }
        }
    };
}

pub(super) use impl_metrics_store;
