-- The metrics' gauges (`GET /v1/metrics`, the overview page) count live operations that are
-- `unknown` or `awaiting_approval`, and how many of them are stuck. With operations_by_status
-- alone each of those rows is read from the table: 20,000 lookups for 20,000 unknowns among a
-- million operations, about 0.2 s, against 4-24 ms with this index. The partial index holds
-- every column the query reads, so the count is read from the index alone, and it holds only
-- the few waiting operations, so writes barely pay for it.
create index operations_waiting on operations (status, retired_at, namespace, updated_at)
    where retired_at is null and status in ('unknown', 'awaiting_approval');
