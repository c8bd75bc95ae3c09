-- The ledger: one row per operation (an intent with its outcome), its append-only audit
-- trail, and the tool registry.

create table tools (
    name       text primary key,
    policy     jsonb not null,
    created_at timestamptz not null,
    updated_at timestamptz not null
);

create table operations (
    id               uuid primary key,   -- UUIDv7: creation order
    namespace        text not null,
    key              text not null,
    key_source       text not null check (key_source in ('header', 'body', 'business', 'derived')),
    tool             text not null,
    effect           text not null check (effect in ('read_only', 'idempotent_write', 'non_idempotent_write', 'irreversible')),
    fingerprint      text not null,
    args             jsonb not null,     -- redacted before it gets here
    run_id           text,
    step             bigint,
    status           text not null check (status in ('awaiting_approval', 'approved', 'pending', 'succeeded', 'failed', 'unknown', 'rejected')),
    attempt          integer not null,
    result           jsonb,
    error            jsonb,
    retryable        boolean not null default false,
    provider_ref     text,
    lease_token      text,
    lease_expires_at timestamptz,
    created_at       timestamptz not null,
    updated_at       timestamptz not null,
    completed_at     timestamptz,
    expires_at       timestamptz not null,
    retired_at       timestamptz,        -- set when a later claim replaced an expired operation
    approval_expires_at timestamptz,          -- when a request for approval lapses
    approval         jsonb               -- decided_by, decided_at, decision, reason
);

-- One live operation per key and namespace; retired ones stay as history.
create unique index operations_live_key on operations (namespace, key) where retired_at is null;
create index operations_newest on operations (namespace, id desc);
create index operations_by_status on operations (status, id desc);

create table operation_events (
    seq          bigserial primary key,
    operation_id uuid not null references operations (id),
    at           timestamptz not null,
    kind         text not null,
    actor        text not null,
    detail       jsonb not null
);
create index operation_events_by_operation on operation_events (operation_id, seq);
