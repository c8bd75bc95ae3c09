-- People, their sessions, and the API keys agents use. Secrets are stored only as SHA-256.

create table users (
    id            blob primary key,
    username      text not null unique,
    role          text not null check (role in ('viewer', 'operator', 'approver', 'admin')),
    password_hash text not null,
    created_at    text not null
);

create table sessions (
    token_hash blob primary key,
    user_id    blob not null references users (id) on delete cascade,
    created_at text not null,
    expires_at text not null
);
create index sessions_by_user on sessions (user_id);

create table api_keys (
    id           blob primary key,
    key_hash     blob not null unique,
    namespace    text not null,
    name         text not null,
    prefix       text not null,
    created_at   text not null,
    last_used_at text,
    revoked_at   text
);
