-- Operation changes are announced by the database itself: a trigger sends the notification
-- inside the transaction that inserts an operation or moves its status, so it is delivered
-- exactly when that transaction commits, and costs the server no round trip of its own.
-- Retiring a key (retired_at) and rescheduling a lookup (next_reconcile_at) change no status
-- and announce nothing. The payload is the server's OperationChange.
create function idem_announce_operation() returns trigger
language plpgsql as $$
begin
    perform pg_notify('idem_operations', json_build_object(
        'id', new.id,
        'namespace', new.namespace,
        'status', new.status,
        'at', new.updated_at
    )::text);
    return null;
end
$$;

create trigger operations_announce
    after insert or update of status, updated_at on operations
    for each row execute function idem_announce_operation();
