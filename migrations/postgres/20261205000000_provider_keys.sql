-- Each operation's own idempotency key at its provider (API: `provider_key`), so that two
-- namespaces, or two generations of one key, never meet at a provider. Operations stored
-- before sent their caller's key to the provider: that stays theirs, since reconciliation
-- must ask the provider by what it saw.
alter table operations add column provider_key text;
update operations set provider_key = key;
alter table operations alter column provider_key set not null;

-- Lease tokens are stored as their SHA-256 digest (lowercase hex) from now on.
update operations
   set lease_token = encode(sha256(convert_to(lease_token, 'UTF8')), 'hex')
 where lease_token is not null;
