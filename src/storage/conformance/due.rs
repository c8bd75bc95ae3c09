//! Background rounds find what is due through indexes of their own, never through every
//! operation of a status: they run every second, under load, and on SQLite inside its writer.

use super::conformance;
use super::metrics::run;
use super::{postgres_generic_plan, sqlite_plan};
use crate::storage::ledger_sql::due_leases_sql;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(run; leases_due_are_read_in_lease_order_through_their_own_index);

/// The lease reaper's round reads the pending operations whose lease ran out in lease order,
/// from `operations_leases_due`: not every pending operation through their status, sorted
/// (on PostgreSQL, every row that was pending since the last vacuum).
async fn leases_due_are_read_in_lease_order_through_their_own_index(
    backend: Backend,
    db: TestDatabase,
    _database: Database,
) {
    if backend == Backend::Sqlite {
        let plan = sqlite_plan(&db, &due_leases_sql::<sqlx::Sqlite>()).await;
        assert!(
            plan.contains("USING INDEX operations_leases_due (status=? AND lease_expires_at<?)")
                && !plan.contains("TEMP B-TREE"),
            "{plan}"
        );
    } else {
        let statement = due_leases_sql::<sqlx::Postgres>();
        let plan = postgres_generic_plan(&db, &statement, "(now(), 100)").await;
        assert!(
            plan.contains("Index Scan using operations_leases_due")
                && !plan.contains("Sort")
                && !plan.contains("Bitmap"),
            "{plan}"
        );
    }
}
