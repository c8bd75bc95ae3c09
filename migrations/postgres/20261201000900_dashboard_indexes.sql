-- The metrics' gauges (`GET /v1/metrics`, the overview page) count live operations that are
-- `unknown` or `awaiting_approval`, and how many of them are stuck. With operations_by_status
-- alone each of those rows is fetched from the heap (20,000 fetches for 20,000 unknowns among
-- a million operations: about 0.35 s); this partial index holds every column the query reads,
-- so the count is an index-only scan (about 4 ms), and it holds only the few waiting
-- operations, so writes barely pay for it.
create index operations_waiting on operations (status, namespace, updated_at)
    where retired_at is null and status in ('unknown', 'awaiting_approval');
