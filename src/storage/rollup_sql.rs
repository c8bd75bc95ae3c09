//! The metrics' roll-up: folds past minutes of events into per-minute counts, by namespace
//! and kind (`event_minutes`, for `GET /v1/metrics`), adds them to their hours' counts
//! (`event_hours`, for wide windows), and moves the watermark past them.
//!
//! A minute is folded once its events are final (`ROLLUP_GRACE_MINUTES` after it), so it is
//! counted on a read connection first and only the counts are written: reading inside the
//! write transaction would hold SQLite's only writer, and every claim behind it, for as long.

use app::ledger::metrics::{minute_start, next_rollup};
use app::store_error::StoreError;
use sqlx::QueryBuilder;
use std::collections::BTreeMap;
use std::ops::Range;

use super::backend::SqlBackend;
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::metrics_sql::{watermark, COUNTED_KIND_LIST};
use super::store_error;

/// Rows per insert statement: four values each, far below either database's bind limit.
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

/// One minute's count of one namespace and kind.
type EventMinute = (i64, String, String, i64);

/// What a range of minutes folds into.
struct FoldedMinutes {
    events: Vec<EventMinute>,
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
        Ok(Self { events })
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
        Ok(())
    }

    /// Adds the minutes' counts to their hours': a fold that starts or ends within an hour
    /// adds to the row an earlier fold began.
    async fn add_to_hours<DB: Dialect>(&self, conn: &mut DB::Connection) -> Result<(), StoreError> {
        let mut hours = BTreeMap::<(i64, &str, &str), i64>::new();
        for (minute, namespace, kind, count) in &self.events {
            *hours
                .entry((minute.div_euclid(60), namespace, kind))
                .or_default() += count;
        }
        let hours: Vec<_> = hours.into_iter().collect();
        for rows in hours.chunks(ROWS_PER_INSERT) {
            let mut sql =
                QueryBuilder::<DB>::new("insert into event_hours (hour, namespace, kind, count) ");
            sql.push_values(rows, |mut row, ((hour, namespace, kind), count)| {
                row.push_bind(DB::value(*hour))
                    .push_bind(DB::value(*namespace))
                    .push_bind(DB::value(*kind))
                    .push_bind(DB::value(*count));
            });
            sql.push(
                " on conflict (hour, namespace, kind) \
                 do update set count = event_hours.count + excluded.count",
            );
            DB::build(&mut sql).run(&mut *conn).await?;
        }
        Ok(())
    }
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
    folded.add_to_hours::<B::Db>(&mut tx).await?;
    sqlx::query::<B::Db>(
        "update metrics_rollup set rolled_until = $1 where name = 'event_minutes'",
    )
    .param(range.end)
    .run(&mut *tx)
    .await?;
    tx.commit().await.map_err(store_error)?;
    Ok((range.end - range.start).unsigned_abs())
}
