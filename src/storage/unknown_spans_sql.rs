//! When operations were `unknown`, the stuck-unknowns series is drawn from (`GET
//! /v1/metrics`): read from the operations `unknown` now and from the events of the settled
//! ones, and folded into `unknown_spans` when retention deletes an operation with its events,
//! so the series over a window stays whole like the counters. Written once for both
//! databases.

use app::ledger::metrics::{SeriesPlan, UnknownSpan, MAX_MINUTES};
use app::store_error::StoreError;
use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::dialect::{Bind, Dialect, Fetch, Run};
use super::retention_sql::placeholders;

/// The events that make an operation `unknown` (of `e`, whose operation is `o`): a report of
/// `unknown`, or a lease that ran out on a tool whose calls are never repeated.
const BECAME_UNKNOWN: &str = "(e.kind = 'marked_unknown' \
     or (e.kind = 'lease_expired' and o.effect in ('non_idempotent_write', 'irreversible')))";

/// The first reconciliation or person's resolution of `e`'s operation at or after it.
const SETTLED: &str = "(select min(x.at) from operation_events x \
     where x.operation_id = e.operation_id and x.kind in ('reconciled', 'resolved') \
       and x.at >= e.at)";

/// The spans that began before `$1` (the window's end) and reach past `$2` (the window's
/// start less the stuck threshold), of namespace `$3` or of all, with how many operations
/// each stands for:
/// - the folded spans of the operations retention deleted;
/// - the settled ones, from the settlements since `$2` with the event each settled. The
///   settlements lead the join, whatever the statistics (a materialized set; `cross join`
///   fixes SQLite's order): from the unknown-making events instead, SQLite, and PostgreSQL
///   on a table not analyzed yet, read every one of a backlog (0.2–0.7 s for 20,000);
/// - the open ones, from the operations `unknown` now, by the index the gauges read; those
///   `unknown` since before `$2` are stuck at every moment of the series, so they come as one
///   row (a backlog of 20,000 is one row, not 20,000 to decode). The others come as one row
///   per group of operations stuck at the same bucket ends (see [`OpenGroups`]).
pub(crate) fn spans<DB: Dialect>() -> String {
    let open = format!("{} and ($3 is null or namespace = $3)", DB::UNKNOWN_NOW);
    let second = DB::unix_second(OPEN_SINCE);
    // Times first: PostgreSQL types a union's `null` from the branches before it.
    format!(
        "with settlements as materialized ( \
           select operation_id, at from operation_events \
           where kind in ('reconciled', 'resolved') and at > $2) \
         select since, until, 1 as operations from unknown_spans \
         where until > $2 and since < $1 and ($3 is null or namespace = $3) \
         union all \
         select e.at, s.at, 1 \
         from settlements s cross join operation_events e cross join operations o \
         where e.operation_id = s.operation_id and o.id = s.operation_id \
           and e.at < $1 and e.at <= s.at and ($3 is null or o.namespace = $3) \
           and {BECAME_UNKNOWN} and s.at = {SETTLED} \
           and not exists (select 1 from unknown_spans f where f.operation_id = e.operation_id) \
         union all \
         select min({OPEN_SINCE}), null, count(*) \
         from operations where {open} and {OPEN_SINCE} < $2 \
         having count(*) > 0 \
         union all \
         select min({OPEN_SINCE}), null, count(*) \
         from operations where {open} and {OPEN_SINCE} >= $2 \
         group by ($4 - {second} + $5 - 1) / $5, {OPEN_SINCE} < $6"
    )
}

/// How the open spans since the window began are grouped: an open span is stuck at a bucket's
/// end when it began more than the threshold before it, so the spans that began between the
/// same two of those moments are stuck at the same ends and count as one. The ends but the
/// newest are whole minutes a bucket apart: with a threshold of whole seconds (all that
/// `IDEM_STUCK_AFTER` can say) the moments are whole seconds a bucket apart, and a span's
/// group is how many of them lie after its second: `ceil(($4 - second) / $5)`. The newest end
/// is now, compared as a time (`$6`). A 7-day series of 20,000 open spans is about 60 rows.
struct OpenGroups {
    /// The Unix second a bucket's width before the newest end's minute, less the threshold:
    /// the moment a span must have begun before to be stuck at the second-newest end.
    second_newest: i64,
    /// The width of a bucket in seconds.
    bucket_seconds: i64,
    /// Now less the threshold.
    newest: DateTime<Utc>,
}

impl OpenGroups {
    fn of(plan: &SeriesPlan) -> Self {
        let second_newest_end = (plan.end_minute - plan.bucket_minutes) * 60;
        Self {
            second_newest: second_newest_end - plan.stuck_after.num_seconds(),
            bucket_seconds: plan.bucket_minutes * 60,
            newest: plan.now - plan.stuck_after,
        }
    }
}

/// When an open span began, as the gauges count it.
const OPEN_SINCE: &str = "coalesce(unknown_since, updated_at)";

/// Folds the settled spans of the operations `$1…` (before retention deletes their events);
/// a span folded by an earlier round stays as it is. The operations lead (`cross join` fixes
/// SQLite's order): led by the events instead, both databases read every unknown-making
/// event of the ledger through the index by kind (40–85 ms a round at 20,000 of them).
pub(super) fn fold(count: usize) -> String {
    format!(
        "insert into unknown_spans (operation_id, namespace, since, until) \
         select operation_id, namespace, since, until from ( \
           select e.operation_id, o.namespace, e.at as since, {SETTLED} as until \
           from operations o cross join operation_events e \
           where e.operation_id = o.id and o.id in ({ids}) and {BECAME_UNKNOWN} \
         ) as spans \
         where until is not null \
         on conflict do nothing",
        ids = placeholders(1, count)
    )
}

/// Forgets the folded spans that ended before `$1`.
const FORGET: &str = "delete from unknown_spans where until < $1";

/// The times operations were `unknown` that matter to the plan's stuck series.
pub(super) async fn read<DB: Dialect>(
    conn: &mut DB::Connection,
    plan: &SeriesPlan,
    namespace: &Option<String>,
) -> Result<Vec<UnknownSpan>, StoreError> {
    let groups = OpenGroups::of(plan);
    let rows: Vec<(DateTime<Utc>, Option<DateTime<Utc>>, i64)> = DB::query_as(&spans::<DB>())
        .param(plan.now)
        .param(plan.from() - plan.stuck_after)
        .param(namespace)
        .param(groups.second_newest)
        .param(groups.bucket_seconds)
        .param(groups.newest)
        .rows(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(since, until, operations)| UnknownSpan {
            since,
            until,
            operations: u64::try_from(operations).unwrap_or(0),
        })
        .collect())
}

/// Keeps the spans of the operations retention is about to delete, and forgets those that
/// ended before the longest window a series can be asked for (with an hour to spare for the
/// clocks of several processes).
pub(super) async fn fold_before_purge<DB: Dialect>(
    conn: &mut DB::Connection,
    ids: &[(Uuid,)],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if !ids.is_empty() {
        let sql = fold(ids.len());
        let mut query = sqlx::query::<DB>(&sql);
        for (id,) in ids {
            query = query.param(*id);
        }
        query.run(conn).await?;
    }
    let forget_before = now - TimeDelta::minutes(MAX_MINUTES) - TimeDelta::hours(1);
    sqlx::query::<DB>(FORGET)
        .param(forget_before)
        .run(conn)
        .await?;
    Ok(())
}
