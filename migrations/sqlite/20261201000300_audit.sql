-- The audit of people: who did what, when, from which address. Append-only: the triggers
-- refuse every update and delete, so a row once written stays as it was.

create table audit_events (
    id      blob primary key,            -- UUIDv7: creation order, the keyset of the listing
    at      text not null,
    actor   text not null,               -- user:<name>, anonymous, cli or system
    address text,                        -- the client's IP address; null from the command line
    action  text not null,               -- e.g. login.failed, api_key.created
    subject text not null,               -- e.g. user:<name>, operation:<id>
    detail  text not null                -- JSON, redacted before it gets here
);

create trigger audit_events_no_update before update on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;

create trigger audit_events_no_delete before delete on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;
