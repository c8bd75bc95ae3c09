//! The metrics' SQL and its `MetricsStore` implementation, written once for both databases.
//!
//! The statements are the same text on SQLite and PostgreSQL; what differs comes from the
//! `Dialect` (the SQL of an event's Unix minute, the row lock of the roll-up watermark, the
//! clock) and the `SqlBackend` (the write transaction). Buckets are numbered in SQL from the newest back
//! (`(end_minute - 1 - minute) / bucket_minutes`), so a query returns one row per bucket and
//! kind, not one per event or minute.

use app::domain::Namespace;
use app::ledger::metrics::{
    assemble, assemble_tools, minute_start, next_rollup, Gauges, KindCount, MetricsReport,
    MetricsStore, MetricsWindow, ReconciledSample, SeriesPlan, ToolCounts, ToolMetrics,
    ToolsReport, COUNTED_KINDS,
};
use app::store_error::StoreError;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use sqlx::types::Json;
use std::sync::LazyLock;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::store_error;
use super::unknown_spans_sql;

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
        cast(coalesce(sum(case when coalesce(unknown_since, updated_at) < $1 then 1 else 0 end), 0) as bigint) as stuck
    from operations
    where retired_at is null and status in ('unknown', 'awaiting_approval') and ($2 is null or namespace = $2)
    group by status"#;

/// Per namespace and tool: operations created since `$1`, failed since `$1`, and the live
/// `unknown` (stuck: since before `$2`) and `awaiting_approval` ones, as the gauges count.
pub const TOOL_OPERATIONS: &str = r#"select namespace, tool,
        cast(sum(case when created_at >= $1 then 1 else 0 end) as bigint) as operations,
        cast(sum(case when status = 'failed' and completed_at >= $1 then 1 else 0 end) as bigint) as failures,
        cast(sum(case when retired_at is null and status = 'unknown' then 1 else 0 end) as bigint) as unknown_now,
        cast(sum(case when retired_at is null and status = 'unknown'
            and coalesce(unknown_since, updated_at) < $2 then 1 else 0 end) as bigint) as stuck,
        cast(sum(case when retired_at is null and status = 'awaiting_approval' then 1 else 0 end) as bigint) as awaiting
    from operations
    where (created_at >= $1 or completed_at >= $1 or status in ('unknown', 'awaiting_approval'))
        and ($3 is null or namespace = $3)
    group by namespace, tool"#;

/// Per namespace and tool: the duplicates prevented since `$1` (the kinds that make up
/// `duplicates_prevented`).
pub const TOOL_DUPLICATES: &str = r#"select o.namespace, o.tool, count(*) as count
    from operation_events e join operations o on o.id = e.operation_id
    where e.kind in ('replayed', 'in_flight_rejected', 'blocked_unknown', 'blocked_awaiting_approval')
        and e.at >= $1 and ($2 is null or o.namespace = $2)
    group by o.namespace, o.tool"#;

/// The `reconciled` events since `$1` with their operation's namespace and tool.
pub const TOOL_RECONCILED: &str = r#"select o.namespace, o.tool, e.detail
    from operation_events e join operations o on o.id = e.operation_id
    where e.kind = 'reconciled' and e.at >= $1 and ($2 is null or o.namespace = $2)"#;

async fn tool_counts<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Vec<ToolCounts>, StoreError> {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let operations: Vec<(String, String, i64, i64, i64, i64, i64)> = DB::query_as(TOOL_OPERATIONS)
        .param(plan.from())
        .param(plan.stuck_before)
        .param(namespace)
        .rows(&mut *conn)
        .await?;
    let duplicates: Vec<(String, String, i64)> = DB::query_as(TOOL_DUPLICATES)
        .param(plan.from())
        .param(namespace)
        .rows(&mut *conn)
        .await?;
    let reconciled: Vec<(String, String, Json<Value>)> = DB::query_as(TOOL_RECONCILED)
        .param(plan.from())
        .param(namespace)
        .rows(&mut *conn)
        .await?;
    let pair = |namespace, tool| ToolMetrics {
        namespace,
        tool,
        ..ToolMetrics::default()
    };
    let counted = |counted| ToolCounts {
        counted,
        reconciled_ms: Vec::new(),
    };
    let rows = operations.into_iter().map(
        |(namespace, tool, operations, failures, unknown, stuck, awaiting)| {
            counted(ToolMetrics {
                operations: count(operations),
                failures: count(failures),
                unknown_now: count(unknown),
                stuck_unknown: count(stuck),
                awaiting_approval: count(awaiting),
                ..pair(namespace, tool)
            })
        },
    );
    let duplicates = duplicates.into_iter().map(|(namespace, tool, n)| {
        counted(ToolMetrics {
            duplicates_prevented: count(n),
            ..pair(namespace, tool)
        })
    });
    let reconciled = reconciled
        .into_iter()
        .map(|(namespace, tool, detail)| ToolCounts {
            counted: pair(namespace, tool),
            reconciled_ms: detail.0["unknown_for_ms"].as_u64().into_iter().collect(),
        });
    Ok(rows.chain(duplicates).chain(reconciled).collect())
}

async fn watermark<DB: Dialect>(
    conn: &mut DB::Connection,
    lock: &str,
) -> Result<Option<i64>, StoreError> {
    let sql = format!("select rolled_until from metrics_rollup where name = 'event_minutes'{lock}");
    let row: Option<(i64,)> = DB::query_as(&sql).maybe_row(conn).await?;
    Ok(row.map(|(minute,)| minute))
}

async fn gauges<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Gauges, StoreError> {
    let rows: Vec<(String, i64, i64)> = DB::query_as(GAUGES)
        .param(plan.stuck_before)
        .param(namespace)
        .rows(conn)
        .await?;
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
impl<B: SqlBackend> MetricsStore for SqlStore<B> {
    async fn metrics(
        &self,
        namespace: Option<&Namespace>,
        window: &MetricsWindow,
        stuck_after: TimeDelta,
    ) -> Result<MetricsReport, StoreError> {
        // Replays and refused duplicates are counted: see this process's so far.
        self.0.quiet_events().flush().await;
        let mut conn = self.0.read_connection().await?;
        let plan = SeriesPlan::new(window.clone(), B::Db::now(&mut conn).await?, stuck_after);
        let namespace = namespace.map(|n| n.to_string());
        // Minutes before the watermark are folded; the rest are read from the events.
        // Retention deletes only events of folded minutes, so a fold or a deletion
        // that commits meanwhile changes nothing.
        let split = watermark::<B::Db>(&mut conn, "")
            .await?
            .unwrap_or(i64::MIN)
            .clamp(plan.start_minute, plan.end_minute);
        let folded: Vec<(i64, String, i64)> = B::Db::query_as(FOLDED_COUNTS)
            .param(plan.end_minute)
            .param(plan.bucket_minutes)
            .param(plan.start_minute)
            .param(split)
            .param(&namespace)
            .rows(&mut *conn)
            .await?;
        let raw: Vec<(i64, String, i64)> = B::Db::query_as(&raw_counts(B::Db::EVENT_MINUTE))
            .param(plan.end_minute)
            .param(plan.bucket_minutes)
            .param(minute_start(split))
            .param(&namespace)
            .rows(&mut *conn)
            .await?;
        let counts: Vec<KindCount> = folded
            .into_iter()
            .chain(raw)
            .map(|(back, kind, count)| KindCount { back, kind, count })
            .collect();
        let reconciled: Vec<(DateTime<Utc>, Json<Value>)> = B::Db::query_as(RECONCILED)
            .param(plan.from())
            .param(&namespace)
            .rows(&mut *conn)
            .await?;
        let samples: Vec<ReconciledSample> = reconciled
            .into_iter()
            .map(|(at, detail)| ReconciledSample {
                at,
                unknown_for_ms: detail.0["unknown_for_ms"].as_u64(),
            })
            .collect();
        let gauges = gauges::<B::Db>(&mut conn, &plan, &namespace).await?;
        let spans = unknown_spans_sql::read::<B::Db>(&mut conn, &plan, &namespace).await?;
        Ok(assemble(&plan, &counts, &samples, &spans, gauges))
    }

    async fn tool_metrics(
        &self,
        namespace: Option<&Namespace>,
        window: &MetricsWindow,
        stuck_after: TimeDelta,
    ) -> Result<ToolsReport, StoreError> {
        // Replays are counted: see this process's so far.
        self.0.quiet_events().flush().await;
        let mut conn = self.0.read_connection().await?;
        let plan = SeriesPlan::new(window.clone(), B::Db::now(&mut conn).await?, stuck_after);
        let namespace = namespace.map(|n| n.to_string());
        let counts = tool_counts::<B::Db>(&mut conn, &plan, &namespace).await?;
        Ok(ToolsReport {
            window: window.to_string(),
            from: plan.from(),
            stuck_after_seconds: u64::try_from(stuck_after.num_seconds()).unwrap_or(0),
            tools: assemble_tools(counts),
        })
    }

    async fn roll_up(&self) -> Result<u64, StoreError> {
        self.0.quiet_events().flush().await;
        let mut tx = self.0.begin_write().await?;
        let now = B::Db::now(&mut tx).await?;
        let range = watermark::<B::Db>(&mut tx, B::Db::SKIP_LOCKED)
            .await?
            .and_then(|from| next_rollup(from, now));
        let Some(range) = range else {
            tx.rollback().await.map_err(store_error)?;
            return Ok(0);
        };
        sqlx::query::<B::Db>(&fold(B::Db::EVENT_MINUTE))
            .param(minute_start(range.start))
            .param(minute_start(range.end))
            .run(&mut *tx)
            .await?;
        sqlx::query::<B::Db>(
            "update metrics_rollup set rolled_until = $1 where name = 'event_minutes'",
        )
        .param(range.end)
        .run(&mut *tx)
        .await?;
        tx.commit().await.map_err(store_error)?;
        Ok((range.end - range.start).unsigned_abs())
    }
}
