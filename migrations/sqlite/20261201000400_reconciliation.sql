-- Reconciliation bookkeeping, and who runs an operation's tool.
--   unknown_since      when the operation last became unknown (reconciliation latency counts from it)
--   reconcile_attempts failed lookups since then; they space out the next ones
--   next_reconcile_at  when the reconciler may ask the provider again (null: now)
--   runner             'agent' (the caller executes, POST /v1/operations) or 'idem'
--                      (POST /v1/tools/{name}/invoke: the ledger executes)
alter table operations add column unknown_since text;
alter table operations add column reconcile_attempts integer not null default 0;
alter table operations add column next_reconcile_at text;
alter table operations add column runner text not null default 'agent' check (runner in ('agent', 'idem'));

create index operations_unknown_due on operations (next_reconcile_at) where status = 'unknown';
