-- The lease reaper looked for pending operations whose lease ran out through
-- `operations_by_status`, every second, inside SQLite's writer: every pending operation,
-- sorted. Pending operations by lease end, of the effects the reaper acts on, are read in
-- lease order and only as far as the leases that ran out (led by the status, as SQLite's
-- planner prefers it to `operations_by_status`; the condition is the reaper's word for
-- word, as SQLite uses a partial index only for a query that repeats it).
create index operations_leases_due on operations (status, lease_expires_at)
    where status = 'pending' and effect in ('non_idempotent_write', 'irreversible');
