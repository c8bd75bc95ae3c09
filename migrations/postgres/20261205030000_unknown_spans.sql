-- When operations were `unknown`, kept when retention deletes the operations with their
-- events, so that the stuck-unknowns series of `GET /v1/metrics` stays whole over its window
-- as the folded counters do (`event_minutes`). Only times and the namespace are kept; a span
-- goes once it ended before the longest metrics window (30 days).
create table unknown_spans (
    operation_id uuid not null,          -- the deleted operation's id (no reference: it is gone)
    namespace    text not null,
    since        timestamptz not null,   -- when it became unknown (the event's `at`)
    until        timestamptz not null,   -- when it was reconciled or resolved
    primary key (operation_id, since)
);
create index unknown_spans_by_until on unknown_spans (until);
