//! Whether PostgreSQL's autovacuum looks after idem's tables. Without it a completion's
//! earlier row version stays until someone vacuums, and a table that is never analyzed may
//! have its keys looked up through every operation of their namespace; nothing fails, the
//! ledger only slows down, so `idem serve` says so when it starts.

use sqlx::postgres::PgPool;

/// What keeps autovacuum away from idem's tables, read from the database.
#[derive(Debug)]
pub(super) struct Neglect {
    /// The server's settings that turn autovacuum off for every table (`autovacuum`, or
    /// `track_counts`, without which it never learns that a table needs it).
    pub(super) settings_off: Vec<String>,
    /// The tables of idem's schema whose own `autovacuum_enabled` is off.
    pub(super) tables_off: Vec<String>,
}

impl Neglect {
    /// Reads what keeps autovacuum away from the tables of the connection's schema.
    pub(super) async fn read(pool: &PgPool) -> Result<Self, sqlx::Error> {
        let settings_off = sqlx::query_scalar(
            "select name from pg_settings \
             where name in ('autovacuum', 'track_counts') and setting = 'off' order by name",
        )
        .fetch_all(pool)
        .await?;
        let tables_off = sqlx::query_scalar(
            "select c.relname::text from pg_class c \
             join pg_namespace n on n.oid = c.relnamespace \
             where n.nspname = current_schema() and c.relkind in ('r', 'p') \
             and exists (select 1 from pg_options_to_table(c.reloptions) o \
                         where o.option_name = 'autovacuum_enabled' \
                         and not o.option_value::boolean) \
             order by c.relname",
        )
        .fetch_all(pool)
        .await?;
        Ok(Self {
            settings_off,
            tables_off,
        })
    }

    /// Logs a warning for each thing that keeps autovacuum away, if any.
    pub(super) fn warn(&self) {
        if !self.settings_off.is_empty() {
            tracing::warn!(
                settings = self.settings_off.join(", "),
                "PostgreSQL's autovacuum is off for every table: idem's tables will \
                 collect dead rows and lack statistics, and lookups slow down; turn it on \
                 or run VACUUM ANALYZE on idem's database regularly"
            );
        }
        if !self.tables_off.is_empty() {
            tracing::warn!(
                tables = self.tables_off.join(", "),
                "autovacuum is disabled on some of idem's tables (autovacuum_enabled = off); \
                 turn it on or run VACUUM ANALYZE on them regularly"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Neglect;
    use crate::storage::postgres::tests::migrated;
    use crate::storage::testing::{Backend, TestDatabase};

    #[tokio::test]
    async fn names_the_tables_whose_autovacuum_is_disabled() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let pool = &store.0.pool;
        assert_eq!(
            Neglect::read(pool).await.unwrap().tables_off,
            Vec::<String>::new()
        );

        for sql in [
            "alter table operations set (autovacuum_enabled = off)",
            "alter table operation_events set (autovacuum_enabled = true)",
            "alter table api_keys set (autovacuum_enabled = 0, fillfactor = 90)",
        ] {
            sqlx::query(sql).execute(pool).await.unwrap();
        }
        let neglect = Neglect::read(pool).await.unwrap();
        assert_eq!(neglect.tables_off, ["api_keys", "operations"]);
    }

    /// The server's own settings are named as the server reports them (this machine's
    /// PostgreSQL may run either way; both settings are fixed for the server's life).
    #[tokio::test]
    async fn names_the_server_settings_that_turn_autovacuum_off() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = migrated(&db).await;
        let pool = &store.0.pool;
        let mut expected = Vec::new();
        for setting in ["autovacuum", "track_counts"] {
            let value: String = sqlx::query_scalar(&format!("show {setting}"))
                .fetch_one(pool)
                .await
                .unwrap();
            if value == "off" {
                expected.push(setting.to_owned());
            }
        }
        assert_eq!(Neglect::read(pool).await.unwrap().settings_off, expected);
    }
}
