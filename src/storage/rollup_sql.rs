//! The metrics' roll-up: folds past minutes of events into per-minute counts, by namespace
//! and kind (`event_minutes`, for `GET /v1/metrics`) and by namespace and tool
//! (`tool_minutes`, for `GET /v1/metrics/tools`), and moves the watermark past them.
//!
//! A minute is folded once its events are final (`ROLLUP_GRACE_MINUTES` after it), so it is
//! counted on a read connection first and only the counts are written: a busy minute holds a
//! few hundred thousand claims, and reading them inside the write transaction would hold
//! SQLite's only writer, and every claim behind it, for as long.

use app::ledger::metrics::{minute_start, next_rollup};
use app::store_error::StoreError;
use sqlx::QueryBuilder;
use std::collections::BTreeMap;
use std::ops::Range;

use super::backend::SqlBackend;
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::metrics_sql::{watermark, COUNTED_KIND_LIST, TOOL_EVENTS, TOOL_MEASURE};
use super::store_error;

/// Rows per insert statement: five values each, far below either database's bind limit.
const ROWS_PER_INSERT: usize = 500;

/// The counted events of `[$1, $2)` per minute, namespace and kind.
fn event_minutes(minute: &str) -> String {
    format!(
        "select {minute}, o.namespace, e.kind, count(*) \
         from operation_events e join operations o on o.id = e.operation_id \
         where e.kind in ({kinds}) and e.at >= $1 and e.at < $2 \
         group by 1, 2, 3",
        kinds = *COUNTED_KIND_LIST
    )
}

/// The events of `[$1, $2)` the table by tool counts, per minute, namespace, tool and
/// measure.
fn tool_minutes(minute: &str) -> String {
    format!(
        "select {minute}, o.namespace, o.tool, {TOOL_MEASURE}, count(*) \
         from operation_events e join operations o on o.id = e.operation_id \
         where e.at >= $1 and e.at < $2 and {TOOL_EVENTS} \
         group by 1, 2, 3, 4"
    )
}

/// One minute's count of one namespace and kind.
type EventMinute = (i64, String, String, i64);
/// One minute's (or hour's) count of one namespace, tool and measure.
type ToolMinute = (i64, String, String, String, i64);

/// What a range of minutes folds into.
struct FoldedMinutes {
    events: Vec<EventMinute>,
    tools: Vec<ToolMinute>,
}

impl FoldedMinutes {
    async fn count<DB: Dialect>(
        conn: &mut DB::Connection,
        range: &Range<i64>,
    ) -> Result<Self, StoreError> {
        let (from, to) = (minute_start(range.start), minute_start(range.end));
        let events = DB::query_as(&event_minutes(DB::EVENT_MINUTE))
            .param(from)
            .param(to)
            .rows(&mut *conn)
            .await?;
        let tools = DB::query_as(&tool_minutes(DB::EVENT_MINUTE))
            .param(from)
            .param(to)
            .rows(&mut *conn)
            .await?;
        Ok(Self { events, tools })
    }

    async fn insert<DB: Dialect>(&self, conn: &mut DB::Connection) -> Result<(), StoreError> {
        for rows in self.events.chunks(ROWS_PER_INSERT) {
            let mut sql = QueryBuilder::<DB>::new(
                "insert into event_minutes (bucket, namespace, kind, count) ",
            );
            sql.push_values(rows, |mut row, (bucket, namespace, kind, count)| {
                row.push_bind(DB::value(*bucket))
                    .push_bind(DB::value(namespace.as_str()))
                    .push_bind(DB::value(kind.as_str()))
                    .push_bind(DB::value(*count));
            });
            DB::build(&mut sql).run(&mut *conn).await?;
        }
        let into_minutes = "insert into tool_minutes (bucket, namespace, tool, measure, count) ";
        insert_tool_counts::<DB>(conn, into_minutes, &self.tools, "").await?;
        // An hour is folded over two rounds when the watermark is not on the hour.
        let hours = self.tool_hours();
        let add = " on conflict (hour, namespace, tool, measure) \
                   do update set count = tool_hours.count + excluded.count";
        let into_hours = "insert into tool_hours (hour, namespace, tool, measure, count) ";
        insert_tool_counts::<DB>(conn, into_hours, &hours, add).await
    }

    /// The tool counts summed per hour, one row per hour, namespace, tool and measure.
    fn tool_hours(&self) -> Vec<ToolMinute> {
        let mut hours = BTreeMap::<(i64, &str, &str, &str), i64>::new();
        for (minute, namespace, tool, measure, count) in &self.tools {
            let hour = minute.div_euclid(60);
            *hours.entry((hour, namespace, tool, measure)).or_default() += count;
        }
        hours
            .into_iter()
            .map(|((hour, namespace, tool, measure), count)| {
                (hour, namespace.into(), tool.into(), measure.into(), count)
            })
            .collect()
    }
}

/// Inserts tool counts with `insert` (`insert into … (time, namespace, tool, measure,
/// count)`), each statement ending with `on_conflict`.
async fn insert_tool_counts<DB: Dialect>(
    conn: &mut DB::Connection,
    insert: &str,
    rows: &[ToolMinute],
    on_conflict: &str,
) -> Result<(), StoreError> {
    for rows in rows.chunks(ROWS_PER_INSERT) {
        let mut sql = QueryBuilder::<DB>::new(insert);
        sql.push_values(rows, |mut row, (time, namespace, tool, measure, count)| {
            row.push_bind(DB::value(*time))
                .push_bind(DB::value(namespace.as_str()))
                .push_bind(DB::value(tool.as_str()))
                .push_bind(DB::value(measure.as_str()))
                .push_bind(DB::value(*count));
        });
        sql.push(on_conflict);
        DB::build(&mut sql).run(&mut *conn).await?;
    }
    Ok(())
}

/// Folds the next due minutes (an hour at most); answers how many. Another process or round
/// that moved the watermark meanwhile wins: nothing is written and the answer is 0.
pub(super) async fn roll_up<B: SqlBackend>(backend: &B) -> Result<u64, StoreError> {
    let mut conn = backend.read_connection().await?;
    let now = B::Db::now(&mut conn).await?;
    let range = watermark::<B::Db>(&mut conn, "")
        .await?
        .and_then(|from| next_rollup(from, now));
    let Some(range) = range else {
        return Ok(0);
    };
    let folded = FoldedMinutes::count::<B::Db>(&mut conn, &range).await?;
    drop(conn);

    let mut tx = backend.begin_write().await?;
    if watermark::<B::Db>(&mut tx, B::Db::SKIP_LOCKED).await? != Some(range.start) {
        tx.rollback().await.map_err(store_error)?;
        return Ok(0);
    }
    folded.insert::<B::Db>(&mut tx).await?;
    sqlx::query::<B::Db>(
        "update metrics_rollup set rolled_until = $1 where name = 'event_minutes'",
    )
    .param(range.end)
    .run(&mut *tx)
    .await?;
    tx.commit().await.map_err(store_error)?;
    Ok((range.end - range.start).unsigned_abs())
}
