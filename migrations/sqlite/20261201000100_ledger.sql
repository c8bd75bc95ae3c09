-- The ledger: one row per operation (an intent with its outcome), its append-only audit
-- trail, and the tool registry. Times are RFC 3339 text written by the server, which sorts
-- and compares correctly because every value is UTC in the same format.

create table tools (
    name       text primary key,
    policy     text not null,            -- JSON of the tool policy
    created_at text not null,
    updated_at text not null
);

create table operations (
    id               blob primary key,   -- UUIDv7: creation order
    namespace        text not null,
    key              text not null,
    key_source       text not null check (key_source in ('header', 'body', 'business', 'derived')),
    tool             text not null,
    effect           text not null check (effect in ('read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible')),
    fingerprint      text not null,
    args             text not null,      -- JSON, redacted before it gets here
    run_id           text,
    step             integer,
    status           text not null check (status in ('awaiting_approval', 'approved', 'pending', 'succeeded', 'failed', 'unknown', 'rejected')),
    attempt          integer not null,
    result           text,               -- JSON
    error            text,               -- JSON
    retryable        integer not null default 0,
    provider_ref     text,
    lease_token      text,
    lease_expires_at text,
    created_at       text not null,
    updated_at       text not null,
    completed_at     text,
    expires_at       text not null,
    retired_at       text,               -- set when a later claim replaced an expired operation
    approval_expires_at text,          -- when a request for approval lapses
    approval         text                -- JSON: decided_by, decided_at, decision, reason
);

-- One live operation per key and namespace; retired ones stay as history.
create unique index operations_live_key on operations (namespace, key) where retired_at is null;
create index operations_newest on operations (namespace, id desc);
create index operations_by_status on operations (status, id desc);

create table operation_events (
    seq          integer primary key autoincrement,
    operation_id blob not null references operations (id),
    at           text not null,
    kind         text not null,
    actor        text not null,
    detail       text not null           -- JSON
);
create index operation_events_by_operation on operation_events (operation_id, seq);
