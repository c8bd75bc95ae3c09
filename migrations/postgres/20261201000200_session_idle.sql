-- Idle expiry: when each session was last used (written at most about once a minute).
-- Sessions opened before this migration count as last used at login.
alter table sessions add column last_used_at timestamptz;
update sessions set last_used_at = created_at;
alter table sessions alter column last_used_at set not null;
