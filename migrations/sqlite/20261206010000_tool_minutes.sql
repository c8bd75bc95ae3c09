-- The overview's table by tool (`GET /v1/metrics/tools`) read every operation and event of
-- its window: 1.4 s for a day of a million-operation week. Past minutes are now folded per
-- namespace and tool too, per minute and per hour, by the worker that folds `event_minutes`
-- and in the same transaction, so all are folded up to the same watermark.
--   operations            operations created (their first `claimed` or `approval_requested`)
--   duplicates_prevented  `replayed`, `in_flight_rejected`, `blocked_unknown`,
--                         `blocked_awaiting_approval` events
--   failures              settlements (`completed`, `reconciled`, `resolved`) of operations
--                         that were `failed` when the minute was folded
create table tool_minutes (
    bucket    integer not null,          -- unix minute: seconds since 1970 / 60
    namespace text not null,
    tool      text not null,
    measure   text not null,
    count     integer not null,
    primary key (bucket, namespace, tool, measure)
) without rowid;

-- The same counts per hour (unix minute / 60), so that a day's window adds up 24 hours and
-- the minutes at its edges instead of 1,440 minutes of every namespace and tool.
create table tool_hours (
    hour      integer not null,
    namespace text not null,
    tool      text not null,
    measure   text not null,
    count     integer not null,
    primary key (hour, namespace, tool, measure)
) without rowid;

-- The minutes folded already, from the events retention has kept.
insert into tool_minutes (bucket, namespace, tool, measure, count)
select cast(strftime('%s', e.at) as integer) / 60, o.namespace, o.tool,
       case when e.kind in ('claimed', 'approval_requested') then 'operations'
            when e.kind in ('completed', 'reconciled', 'resolved') then 'failures'
            else 'duplicates_prevented' end,
       count(*)
from operation_events e join operations o on o.id = e.operation_id
where cast(strftime('%s', e.at) as integer) / 60
        < (select rolled_until from metrics_rollup where name = 'event_minutes')
    and ((e.kind in ('claimed', 'approval_requested') and e.at = o.created_at)
        or e.kind in ('replayed', 'in_flight_rejected', 'blocked_unknown', 'blocked_awaiting_approval')
        or (e.kind in ('completed', 'reconciled', 'resolved') and o.status = 'failed' and e.at = o.completed_at))
group by 1, 2, 3, 4;

insert into tool_hours (hour, namespace, tool, measure, count)
select bucket / 60, namespace, tool, measure, sum(count)
from tool_minutes
group by 1, 2, 3, 4;

-- The gauges, the stuck series and the table's live counts read waiting operations by
-- namespace and tool, and count stuck ones from `unknown_since` (or the last change): with
-- every column they name in the index, `retired_at` too (SQLite reads the table for a column
-- of the index's condition otherwise), they never read the table (20,000 unknowns: 4 ms
-- against 0.1 s).
drop index operations_waiting;
create index operations_waiting on operations (status, retired_at, namespace, tool, unknown_since, updated_at)
    where retired_at is null and status in ('unknown', 'awaiting_approval');
