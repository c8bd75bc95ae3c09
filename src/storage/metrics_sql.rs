//! The metrics' SQL and its `MetricsStore` implementation, written once for both databases.
//!
//! The statements are the same text on SQLite and PostgreSQL; what differs comes from the
//! `Dialect` (the SQL of an event's Unix minute, the row lock of the roll-up watermark, the
//! clock) and the `SqlBackend` (the write transaction). Buckets are numbered in SQL from the newest back
//! (`(end_minute - 1 - minute) / bucket_minutes`), so a query returns one row per bucket and
//! kind, not one per event or minute.

use app::domain::Namespace;
use app::ledger::metrics::{
    assemble, assemble_tools, minute_start, Gauges, KindCount, MetricsReport, MetricsStore,
    MetricsWindow, ReconciledSample, SeriesPlan, ToolCounts, ToolMeasure, ToolMetrics, ToolsReport,
    COUNTED_KINDS,
};
use app::store_error::StoreError;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::QueryBuilder;
use std::ops::Range;
use std::sync::LazyLock;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch};
use super::rollup_sql;
use super::unknown_spans_sql;

/// `'replayed', 'in_flight_rejected', …`: the kinds the counters are made of.
pub static COUNTED_KIND_LIST: LazyLock<String> = LazyLock::new(|| {
    COUNTED_KINDS
        .iter()
        .map(|kind| format!("'{}'", kind.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
});

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

/// Per namespace, tool and measure, the counts of the minutes `[$1, $2)` and `[$3, $4)` and
/// of the hours `[$5, $6)`.
pub const TOOL_COUNTS: &str = r#"select namespace, tool, measure, cast(sum(count) as bigint) as count
    from (
        select namespace, tool, measure, count from tool_minutes
        where bucket >= $1 and bucket < $2 and ($7 is null or namespace = $7)
        union all
        select namespace, tool, measure, count from tool_minutes
        where bucket >= $3 and bucket < $4 and ($7 is null or namespace = $7)
        union all
        select namespace, tool, measure, count from tool_hours
        where hour >= $5 and hour < $6 and ($7 is null or namespace = $7)
    ) as folded
    group by namespace, tool, measure"#;

/// A range of minutes as `tool_hours` and `tool_minutes` hold it: the whole hours inside it,
/// and the minutes before and after them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ByHours {
    minutes_before: Range<i64>,
    hours: Range<i64>,
    minutes_after: Range<i64>,
}

impl ByHours {
    fn of(minutes: Range<i64>) -> Self {
        let first_hour =
            minutes.start.div_euclid(60) + i64::from(minutes.start.rem_euclid(60) != 0);
        let end_hour = minutes.end.div_euclid(60);
        if first_hour >= end_hour {
            let end = minutes.end;
            return Self {
                minutes_before: minutes,
                hours: 0..0,
                minutes_after: end..end,
            };
        }
        Self {
            minutes_before: minutes.start..first_hour * 60,
            hours: first_hour..end_hour,
            minutes_after: end_hour * 60..minutes.end,
        }
    }
}

/// How a window's folded minutes `[start, split)` are read: the whole hours that lie in one
/// bucket from `event_hours`, the rest minute by minute from `event_minutes`. Buckets are laid
/// back from the window's end, so when the end is not on the hour, every bucket's edge cuts
/// an hour: for 6-hour buckets that is one hour in six read by its minutes; for 1-hour
/// buckets, every hour, so the window is one range of minutes as before.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FoldedRead {
    /// Ranges of minutes read from `event_minutes`, in order, apart from each other.
    minutes: Vec<Range<i64>>,
    /// The hours read from `event_hours`, but those a bucket's edge cuts: an hour is cut when
    /// its start lies 1 to 59 minutes past a whole number of buckets before the window's end.
    hours: Range<i64>,
}

impl FoldedRead {
    fn of(plan: &SeriesPlan, split: i64) -> Self {
        let minutes = plan.start_minute..split.max(plan.start_minute);
        if plan.bucket_minutes % 60 != 0 {
            // Buckets narrower than an hour: every minute is read.
            return Self {
                minutes: joined(vec![minutes]),
                hours: 0..0,
            };
        }
        let edges = ByHours::of(minutes);
        let mut ranges = vec![edges.minutes_before];
        if plan.end_minute % 60 != 0 && !edges.hours.is_empty() {
            let every = plan.bucket_minutes / 60;
            let last = edges.hours.end - 1;
            let newest_cut = last - (last - plan.end_minute.div_euclid(60)).rem_euclid(every);
            let cut = (edges.hours.start..=newest_cut)
                .rev()
                .step_by(usize::try_from(every).unwrap_or(1));
            ranges.extend(cut.map(|hour| hour * 60..hour * 60 + 60));
        }
        ranges.push(edges.minutes_after);
        Self {
            minutes: joined(ranges),
            hours: edges.hours,
        }
    }

    /// The query of the counts per bucket (back) and kind, of namespace `namespace` or all.
    fn query<'q, DB: Dialect>(
        &self,
        plan: &SeriesPlan,
        namespace: &'q Option<String>,
    ) -> QueryBuilder<'q, DB> {
        // One select per range: an `or` of ranges, SQLite (without statistics) reads
        // the whole table for.
        let mut sql = QueryBuilder::<DB>::new(
            "select back, kind, cast(sum(count) as bigint) as count from (",
        );
        for range in &self.minutes {
            sql.push("select (")
                .push_bind(DB::value(plan.end_minute))
                .push(" - 1 - bucket) / ")
                .push_bind(DB::value(plan.bucket_minutes))
                .push(" as back, kind, count from event_minutes where bucket >= ")
                .push_bind(DB::value(range.start))
                .push(" and bucket < ")
                .push_bind(DB::value(range.end));
            of_namespace(&mut sql, namespace);
            sql.push(" union all ");
        }
        sql.push("select (")
            .push_bind(DB::value(plan.end_minute))
            .push(" - 1 - hour * 60) / ")
            .push_bind(DB::value(plan.bucket_minutes))
            .push(" as back, kind, count from event_hours where hour >= ")
            .push_bind(DB::value(self.hours.start))
            .push(" and hour < ")
            .push_bind(DB::value(self.hours.end))
            .push(" and (")
            .push_bind(DB::value(plan.end_minute))
            .push(" - hour * 60) % ")
            .push_bind(DB::value(plan.bucket_minutes))
            .push(" not between 1 and 59");
        of_namespace(&mut sql, namespace);
        sql.push(") as folded group by back, kind");
        sql
    }
}

/// The ranges in order, those that touch or overlap made one, the empty ones left out.
fn joined(mut ranges: Vec<Range<i64>>) -> Vec<Range<i64>> {
    ranges.retain(|range| !range.is_empty());
    ranges.sort_by_key(|range| range.start);
    let mut joined: Vec<Range<i64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match joined.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => joined.push(range),
        }
    }
    joined
}

/// Narrows a read to one namespace, when one is given.
fn of_namespace<'q, DB: Dialect>(sql: &mut QueryBuilder<'q, DB>, namespace: &'q Option<String>) {
    if let Some(namespace) = namespace {
        sql.push(" and namespace = ")
            .push_bind(DB::value(namespace.as_str()));
    }
}

/// The folded counts of the plan's window before `split`, per bucket (back) and kind.
pub(super) async fn folded_counts<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    split: i64,
    namespace: &Option<String>,
) -> Result<Vec<(i64, String, i64)>, StoreError> {
    let mut query = FoldedRead::of(plan, split).query::<DB>(plan, namespace);
    DB::build_query_as(&mut query).rows(conn).await
}

#[cfg(test)]
pub(super) fn folded_counts_sql<DB: Dialect>(plan: &SeriesPlan, split: i64) -> String {
    FoldedRead::of(plan, split)
        .query::<DB>(plan, &None)
        .sql()
        .to_owned()
}

/// Per namespace, tool and status: the live operations `unknown` or `awaiting_approval`,
/// and how many were `unknown` since before `$1` (stuck), as the gauges count.
pub const TOOL_GAUGES: &str = r#"select namespace, tool, status, count(*) as count,
        cast(coalesce(sum(case when coalesce(unknown_since, updated_at) < $1 then 1 else 0 end), 0) as bigint) as stuck
    from operations
    where retired_at is null and status in ('unknown', 'awaiting_approval') and ($2 is null or namespace = $2)
    group by namespace, tool, status"#;

/// The `reconciled` events since `$1` with their operation's namespace and tool.
pub const TOOL_RECONCILED: &str = r#"select o.namespace, o.tool, e.detail
    from operation_events e join operations o on o.id = e.operation_id
    where e.kind = 'reconciled' and e.at >= $1 and ($2 is null or o.namespace = $2)"#;

/// A namespace and tool's row with nothing counted yet.
fn tool_row(namespace: String, tool: String) -> ToolMetrics {
    ToolMetrics {
        namespace,
        tool,
        ..ToolMetrics::default()
    }
}

/// A count as the database returns it (never negative) as the report holds it.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The window's operations, duplicates and failures by namespace and tool, as counted when
/// they were written (see `tool_counts_sql`).
async fn tool_measures<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Vec<ToolMetrics>, StoreError> {
    let window = ByHours::of(plan.start_minute..plan.end_minute);
    let rows: Vec<(String, String, String, i64)> = DB::query_as(TOOL_COUNTS)
        .param(window.minutes_before.start)
        .param(window.minutes_before.end)
        .param(window.minutes_after.start)
        .param(window.minutes_after.end)
        .param(window.hours.start)
        .param(window.hours.end)
        .param(namespace)
        .rows(&mut *conn)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(namespace, tool, measure, n)| {
            let row = tool_row(namespace, tool);
            Some(match ToolMeasure::parse(&measure)? {
                ToolMeasure::Operations => ToolMetrics {
                    operations: count(n),
                    ..row
                },
                ToolMeasure::Failures => ToolMetrics {
                    failures: count(n),
                    ..row
                },
                ToolMeasure::DuplicatesPrevented => ToolMetrics {
                    duplicates_prevented: count(n),
                    ..row
                },
            })
        })
        .collect())
}

/// What waits now by namespace and tool.
async fn tool_gauges<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Vec<ToolMetrics>, StoreError> {
    let rows: Vec<(String, String, String, i64, i64)> = DB::query_as(TOOL_GAUGES)
        .param(plan.stuck_before)
        .param(namespace)
        .rows(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(namespace, tool, status, n, stuck)| {
            let row = tool_row(namespace, tool);
            if status == "unknown" {
                ToolMetrics {
                    unknown_now: count(n),
                    stuck_unknown: count(stuck),
                    ..row
                }
            } else {
                ToolMetrics {
                    awaiting_approval: count(n),
                    ..row
                }
            }
        })
        .collect())
}

async fn tool_counts<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Vec<ToolCounts>, StoreError> {
    let mut counted = tool_measures::<DB>(conn, plan, namespace).await?;
    counted.extend(tool_gauges::<DB>(conn, plan, namespace).await?);
    let reconciled: Vec<(String, String, Json<Value>)> = DB::query_as(TOOL_RECONCILED)
        .param(plan.from())
        .param(namespace)
        .rows(&mut *conn)
        .await?;
    let counted = counted.into_iter().map(|counted| ToolCounts {
        counted,
        reconciled_ms: Vec::new(),
    });
    let reconciled = reconciled
        .into_iter()
        .map(|(namespace, tool, detail)| ToolCounts {
            counted: tool_row(namespace, tool),
            reconciled_ms: detail.0["unknown_for_ms"].as_u64().into_iter().collect(),
        });
    Ok(counted.chain(reconciled).collect())
}

/// The first minute of the plan's window not folded yet: minutes before it are read from the
/// roll-ups, the rest from the events. Retention deletes only events of folded minutes, so a
/// fold or a deletion that commits meanwhile changes nothing.
async fn folded_until<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
) -> Result<i64, StoreError> {
    Ok(watermark::<DB>(conn, "")
        .await?
        .unwrap_or(i64::MIN)
        .clamp(plan.start_minute, plan.end_minute))
}

pub(super) async fn watermark<DB: Dialect>(
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
    for (status, n, stuck) in rows {
        if status == "unknown" {
            gauges.unknown_now = count(n);
            gauges.stuck_unknown = count(stuck);
        } else {
            gauges.awaiting_approval = count(n);
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
        self.0.written_behind().flush().await;
        let mut conn = self.0.read_connection().await?;
        let plan = SeriesPlan::new(window.clone(), B::Db::now(&mut conn).await?, stuck_after);
        let namespace = namespace.map(|n| n.to_string());
        let split = folded_until::<B::Db>(&mut conn, &plan).await?;
        let folded = folded_counts::<B::Db>(&mut conn, &plan, split, &namespace).await?;
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
        // The counts are written behind: see this process's so far.
        self.0.written_behind().flush().await;
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
        // What this process counted so far is folded too.
        self.0.written_behind().flush().await;
        rollup_sql::roll_up(&self.0).await
    }
}

#[cfg(test)]
mod tests {
    use super::{ByHours, FoldedRead};
    use app::ledger::metrics::{minute_start, MetricsWindow, SeriesPlan, DEFAULT_STUCK_AFTER};
    use std::collections::BTreeSet;

    /// The minutes `read` covers, each once (or it panics), as its query reads them: its
    /// ranges of minutes, and the hours its SQL does not find cut, each of which must lie in
    /// one bucket.
    fn minutes_read(plan: &SeriesPlan, read: &FoldedRead) -> BTreeSet<i64> {
        let width = plan.bucket_minutes;
        let back = |minute: i64| (plan.end_minute - 1 - minute) / width;
        let cut_by_sql = |hour: i64| (1..=59).contains(&((plan.end_minute - hour * 60) % width));
        let mut minutes = BTreeSet::new();
        let mut add = |minute: i64| assert!(minutes.insert(minute), "minute {minute} read twice");
        read.minutes.iter().cloned().flatten().for_each(&mut add);
        for hour in read.hours.clone().filter(|&hour| !cut_by_sql(hour)) {
            assert_eq!(
                back(hour * 60),
                back(hour * 60 + 59),
                "hour {hour} in one bucket"
            );
            (hour * 60..hour * 60 + 60).for_each(&mut add);
        }
        minutes
    }

    #[test]
    fn a_window_reads_each_folded_minute_once_and_whole_hours_only_within_a_bucket() {
        let midnight = 480_000 * 60;
        for window in ["90m", "24h", "49h", "7d", "30d", "2000m"] {
            let window = MetricsWindow::try_from(window).unwrap();
            for end_offset in [0, 1, 29, 58, 59, 60, 359] {
                let now = minute_start(midnight + end_offset);
                let plan = SeriesPlan::new(window.clone(), now, DEFAULT_STUCK_AFTER);
                let splits = [
                    plan.start_minute - 5,
                    plan.start_minute,
                    plan.start_minute + 61,
                    plan.end_minute - 130,
                    plan.end_minute - 1,
                    plan.end_minute,
                ];
                for split in splits {
                    let read = FoldedRead::of(&plan, split);
                    let expected: BTreeSet<i64> = (plan.start_minute..split).collect();
                    assert_eq!(
                        minutes_read(&plan, &read),
                        expected,
                        "{window} ending {end_offset} past midnight, split at {split}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_week_ending_off_the_hour_reads_one_hour_in_six_by_its_minutes() {
        // 20 past: each 6-hour bucket has five whole hours and one cut by its edge.
        let week = MetricsWindow::try_from("7d").unwrap();
        let now = minute_start(480_000 * 60 + 19);
        let plan = SeriesPlan::new(week.clone(), now, DEFAULT_STUCK_AFTER);
        let read = FoldedRead::of(&plan, plan.end_minute);
        assert_eq!(read.hours, 480_000 - 168 + 1..480_000);
        let cut: Vec<_> = read.minutes.iter().map(|range| range.start / 60).collect();
        let expected: Vec<_> = (480_000 - 168..=480_000).step_by(6).collect();
        assert_eq!(
            cut, expected,
            "the window's first minutes, each hour cut, the current hour's minutes"
        );

        let on_the_hour =
            SeriesPlan::new(week, minute_start(480_000 * 60 - 1), DEFAULT_STUCK_AFTER);
        let read = FoldedRead::of(&on_the_hour, on_the_hour.end_minute);
        assert!(read.minutes.is_empty(), "{:?}", read.minutes);
        assert_eq!(read.hours, 480_000 - 168..480_000);
    }

    #[test]
    fn a_day_reads_one_range_of_minutes_as_every_hour_is_cut() {
        let now = minute_start(480_000 * 60 + 19);
        let plan = SeriesPlan::new(MetricsWindow::default(), now, DEFAULT_STUCK_AFTER);
        let read = FoldedRead::of(&plan, plan.end_minute - 3);
        assert_eq!(read.minutes.len(), 1);
        assert_eq!(read.minutes[0], plan.start_minute..plan.end_minute - 3);
    }

    #[test]
    fn a_range_of_minutes_reads_its_whole_hours_and_the_minutes_at_its_edges() {
        // From half past hour 100 to a quarter past hour 103: 30 minutes, hours 101 and 102,
        // then 15 minutes.
        let minutes = 100 * 60 + 30..102 * 60 + 75;
        assert_eq!(
            ByHours::of(minutes),
            ByHours {
                minutes_before: 6030..6060,
                hours: 101..103,
                minutes_after: 6180..6195,
            }
        );
        let on_the_hour = ByHours::of(6000..6120);
        assert_eq!(
            on_the_hour,
            ByHours {
                minutes_before: 6000..6000,
                hours: 100..102,
                minutes_after: 6120..6120,
            }
        );
    }

    #[test]
    fn a_range_within_one_hour_reads_minutes_only() {
        for minutes in [6010..6050, 6000..6059, 6030..6090, 6050..6050] {
            let read = ByHours::of(minutes.clone());
            assert_eq!(read.minutes_before, minutes);
            assert!(read.hours.is_empty() && read.minutes_after.is_empty());
        }
    }
}
