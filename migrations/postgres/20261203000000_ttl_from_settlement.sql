-- An operation's time to live counts from when it settles (API.md: "they must settle first,
-- then the TTL counts"), so each settlement sets expires_at to then plus the TTL the tool had
-- when the operation was created, kept here. Null for operations stored before: their TTL is
-- the span between created_at and expires_at.
alter table operations add column ttl_seconds bigint;
