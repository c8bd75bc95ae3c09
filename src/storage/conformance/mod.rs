//! One suite, every backend: each check runs against a fresh SQLite file and a fresh
//! PostgreSQL database, so the two implementations cannot drift apart.

mod approvals;
mod audit;
mod changes;
mod hot_path;
mod identity;
pub(crate) mod ledger;
mod metrics;
mod retention;

/// Runs each named check once per backend, through the given runner.
macro_rules! conformance {
    ($runner:ident; $($check:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $check() { super::$runner(super::Backend::Sqlite, super::$check).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $check() { super::$runner(super::Backend::Postgres, super::$check).await; })*
        }
    };
}
use conformance;
