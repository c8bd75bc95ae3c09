-- The table by tool (`tool_minutes`, `tool_hours`) is counted as decisions commit from now
-- on, no longer folded from the events by the roll-up worker: folding read every claim and
-- completion again. The minutes the worker had not folded yet are counted here, once, from
-- their events and by the rule it folded with.
insert into tool_minutes (bucket, namespace, tool, measure, count)
select floor(extract(epoch from e.at) / 60)::bigint, o.namespace, o.tool,
       case when e.kind in ('claimed', 'approval_requested') then 'operations'
            when e.kind in ('completed', 'reconciled', 'resolved') then 'failures'
            else 'duplicates_prevented' end,
       count(*)
from operation_events e join operations o on o.id = e.operation_id
where floor(extract(epoch from e.at) / 60)::bigint
        >= (select rolled_until from metrics_rollup where name = 'event_minutes')
    and ((e.kind in ('claimed', 'approval_requested') and e.at = o.created_at)
        or e.kind in ('replayed', 'in_flight_rejected', 'blocked_unknown', 'blocked_awaiting_approval')
        or (e.kind in ('completed', 'reconciled', 'resolved') and o.status = 'failed' and e.at = o.completed_at))
group by 1, 2, 3, 4;

-- The hour of the watermark has rows already, folded before it.
insert into tool_hours (hour, namespace, tool, measure, count)
select bucket / 60, namespace, tool, measure, sum(count)
from tool_minutes
where bucket >= (select rolled_until from metrics_rollup where name = 'event_minutes')
group by 1, 2, 3, 4
on conflict (hour, namespace, tool, measure) do update set count = tool_hours.count + excluded.count;
