-- Each operation's own idempotency key at its provider (API: `provider_key`), so that two
-- namespaces, or two generations of one key, never meet at a provider. Operations stored
-- before sent their caller's key to the provider: that stays theirs, since reconciliation
-- must ask the provider by what it saw.
alter table operations add column provider_key text not null default '';
update operations set provider_key = key;

-- Lease tokens are stored as their SHA-256 digest from now on. SQLite has no SHA-256 in SQL:
-- the leases stored in clear are listed here, and the server hashes them right after
-- migrating (and empties this list).
create table lease_tokens_in_clear (operation_id blob primary key);
insert into lease_tokens_in_clear select id from operations where lease_token is not null;
