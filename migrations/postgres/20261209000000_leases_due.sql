-- The lease reaper looked for pending operations whose lease ran out through
-- `operations_by_status`, every second. On PostgreSQL that index keeps an entry for every
-- row that was ever pending until a vacuum removes it (a completion changes the status, so
-- it is not a HOT update), and a bitmap scan rechecks each of them: 40 to 80 ms a round
-- after a minute at two thousand claims a second, growing until the next vacuum. Pending
-- operations by lease end, of the effects the reaper acts on, are read in lease order and
-- only as far as the leases that ran out; an index scan also marks the entries of rows that
-- are gone, so the next round skips them.
create index operations_leases_due on operations (lease_expires_at)
    where status = 'pending' and effect in ('non_idempotent_write', 'irreversible');
