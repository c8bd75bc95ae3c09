-- Metrics (`GET /v1/metrics`). The counters are read from events by kind and time, hence the
-- index; past minutes are folded by a background worker into per-minute counts, so a 30-day
-- window reads at most 43,200 minutes per kind and namespace instead of every event.

create index operation_events_by_kind_at on operation_events (kind, at);

create table event_minutes (
    bucket    integer not null,          -- unix minute: seconds since 1970 / 60
    namespace text not null,
    kind      text not null,
    count     integer not null,
    primary key (bucket, namespace, kind)
);

-- How far the fold has come: every minute before `rolled_until` is in event_minutes.
create table metrics_rollup (
    name         text primary key,
    rolled_until integer not null        -- the first unix minute not folded yet
);

-- Start at the oldest event (or now, on an empty ledger).
insert into metrics_rollup (name, rolled_until)
select 'event_minutes',
       coalesce(min(cast(strftime('%s', at) as integer) / 60), cast(strftime('%s', 'now') as integer) / 60)
from operation_events;
