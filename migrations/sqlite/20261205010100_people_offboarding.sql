-- Offboarding and first passwords: a person can be disabled (signed out, refused at sign-in)
-- and must choose a new password before anything else when `must_change_password` is set
-- (the first admin, whose password was generated and printed).
alter table users add column disabled_at text;
alter table users add column must_change_password integer not null default 0;
