//! The table by tool's counts (`tool_minutes`, `tool_hours`), added to as decisions commit
//! (see `written_behind`): each write adds its counts to the rows of their minute and hour.

use app::store_error::StoreError;
use sqlx::QueryBuilder;
use std::collections::BTreeMap;

use super::dialect::{Dialect, Run};
use super::written_behind::Tally;

/// Rows per statement: five values each, far below either database's bind limit.
const ROWS_PER_INSERT: usize = 500;

/// One row's key: its minute (or hour), namespace, tool and measure.
type Row<'a> = (i64, &'a str, &'a str, &'static str);

/// Adds `tally` to the minutes' and the hours' rows, in the order of their keys (two
/// processes adding to the same rows then wait for each other instead of deadlocking).
pub(crate) async fn add<DB: Dialect>(
    conn: &mut DB::Connection,
    tally: &Tally,
) -> Result<(), StoreError> {
    let mut minutes = BTreeMap::<Row, i64>::new();
    let mut hours = BTreeMap::<Row, i64>::new();
    for (tick, count) in tally {
        let (namespace, tool) = (tick.namespace.as_str(), tick.tool.as_str());
        let measure = tick.measure.as_str();
        *minutes
            .entry((tick.minute, namespace, tool, measure))
            .or_default() += count;
        let hour = tick.minute.div_euclid(60);
        *hours.entry((hour, namespace, tool, measure)).or_default() += count;
    }
    upsert::<DB>(conn, "tool_minutes", "bucket", &minutes).await?;
    upsert::<DB>(conn, "tool_hours", "hour", &hours).await
}

async fn upsert<DB: Dialect>(
    conn: &mut DB::Connection,
    table: &str,
    time: &str,
    rows: &BTreeMap<Row<'_>, i64>,
) -> Result<(), StoreError> {
    let rows: Vec<_> = rows.iter().collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut sql = QueryBuilder::<DB>::new(format!(
            "insert into {table} ({time}, namespace, tool, measure, count) "
        ));
        sql.push_values(chunk, |mut row, ((at, namespace, tool, measure), count)| {
            row.push_bind(DB::value(*at))
                .push_bind(DB::value(*namespace))
                .push_bind(DB::value(*tool))
                .push_bind(DB::value(*measure))
                .push_bind(DB::value(**count));
        });
        sql.push(format!(
            " on conflict ({time}, namespace, tool, measure) \
             do update set count = {table}.count + excluded.count"
        ));
        DB::build(&mut sql).run(&mut *conn).await?;
    }
    Ok(())
}
