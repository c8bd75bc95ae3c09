-- Replays answered from memory on PostgreSQL (see src/storage/postgres/kept_members.rs).
--
-- Each server process that keeps final outcomes in memory is a member: it holds a lease,
-- renewed by a beat every second, and says which fence it has seen. A change that replaces a
-- final outcome takes a fence number after it commits, notifies it, and answers its caller
-- only once every member with a live lease has seen that fence: notifications arrive in
-- commit order, so a member that saw the fence has already forgotten the replaced outcome.
create sequence kept_fences;

create table kept_members (
    id uuid primary key,
    lease_until timestamptz not null,
    seen_through bigint not null
);

-- The announcement now names the key, so that a member forgets exactly the outcome it kept.
create or replace function idem_announce_operation() returns trigger
language plpgsql as $$
begin
    perform pg_notify('idem_operations', json_build_object(
        'id', new.id,
        'namespace', new.namespace,
        'key', new.key,
        'status', new.status,
        'at', new.updated_at
    )::text);
    return null;
end
$$;
