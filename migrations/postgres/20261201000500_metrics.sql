-- Metrics (`GET /v1/metrics`). The counters are read from events by kind and time, hence the
-- index; past minutes are folded by a background worker into per-minute counts, so a 30-day
-- window reads at most 43,200 minutes per kind and namespace instead of every event.

create index operation_events_by_kind_at on operation_events (kind, at);

create table event_minutes (
    bucket    bigint not null,           -- unix minute: seconds since 1970 / 60
    namespace text not null,
    kind      text not null,
    count     bigint not null,
    primary key (bucket, namespace, kind)
);

-- How far the fold has come: every minute before `rolled_until` is in event_minutes.
create table metrics_rollup (
    name         text primary key,
    rolled_until bigint not null         -- the first unix minute not folded yet
);

-- Start at the oldest event (or now, on an empty ledger).
insert into metrics_rollup (name, rolled_until)
select 'event_minutes',
       coalesce(floor(extract(epoch from min(at)) / 60), floor(extract(epoch from now()) / 60))::bigint
from operation_events;
