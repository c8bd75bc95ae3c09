//! Integration tests: the real application on port 0, a fresh database per test, real HTTP.
//! Every test runs once on SQLite and once on PostgreSQL.

mod helpers;

mod approvals;
mod auth;
mod cli;
mod errors;
mod keys_and_users;
mod lifecycle;
mod openapi;
mod operations;
mod processes;
mod rate_limits;
mod roles;
mod security;
mod sessions;
mod ui;
