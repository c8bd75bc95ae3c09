-- Idle expiry: when each session was last used (written at most about once a minute).
-- SQLite cannot add a NOT NULL column without a default; every insert sets it, and sessions
-- opened before this migration count as last used at login.
alter table sessions add column last_used_at text;
update sessions set last_used_at = created_at;
