-- The audit of people: who did what, when, from which address. Append-only: the triggers
-- refuse every update, delete and truncate, so a row once written stays as it was.

create table audit_events (
    id      uuid primary key,            -- UUIDv7: creation order, the keyset of the listing
    at      timestamptz not null,
    actor   text not null,               -- user:<name>, anonymous, cli or system
    address text,                        -- the client's IP address; null from the command line
    action  text not null,               -- e.g. login.failed, api_key.created
    subject text not null,               -- e.g. user:<name>, operation:<id>
    detail  jsonb not null               -- redacted before it gets here
);

create function audit_events_append_only() returns trigger language plpgsql as $$
begin
    raise exception 'audit_events is append-only';
end;
$$;

create trigger audit_events_no_change before update or delete on audit_events
    for each row execute function audit_events_append_only();

create trigger audit_events_no_truncate before truncate on audit_events
    for each statement execute function audit_events_append_only();
