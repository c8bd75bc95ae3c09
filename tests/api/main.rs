//! Integration tests: the real application on port 0, a fresh database per test, real HTTP.
//! Every test runs once on SQLite and once on PostgreSQL.

mod helpers;
mod sandbox_helpers;

mod alerts;
mod approvals;
mod audit;
mod auth;
mod bounds;
mod changes;
mod cli;
mod demo;
mod errors;
mod fault_processes;
mod faults;
mod interventions;
mod keys_and_users;
mod lifecycle;
mod mcp_forwarding;
mod mcp_proxy;
mod metrics;
mod openapi;
mod operation_export;
mod operation_filters;
mod operations;
mod outage;
mod people;
mod processes;
mod provider;
mod provider_keys;
mod rate_limits;
mod read_caches;
mod redaction;
mod roles;
mod sandbox;
mod sandbox_faults;
mod security;
mod sessions;
mod sign_in_throttle;
mod stuck;
mod supervision;
mod ui;
mod ui_admin;
mod ui_operations;
mod ui_people;
mod webhook;
