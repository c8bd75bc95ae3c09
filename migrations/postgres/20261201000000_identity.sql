-- People, their sessions, and the API keys agents use. Secrets are stored only as SHA-256.

create table users (
    id            uuid primary key,
    username      text not null unique,
    role          text not null check (role in ('viewer', 'operator', 'approver', 'admin')),
    password_hash text not null,
    created_at    timestamptz not null
);

create table sessions (
    token_hash bytea primary key,
    user_id    uuid not null references users (id) on delete cascade,
    created_at timestamptz not null,
    expires_at timestamptz not null
);
create index sessions_by_user on sessions (user_id);

create table api_keys (
    id           uuid primary key,
    key_hash     bytea not null unique,
    namespace    text not null,
    name         text not null,
    prefix       text not null,
    created_at   timestamptz not null,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
