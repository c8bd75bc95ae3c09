//! Fresh databases for tests: a SQLite file in a folder of its own in the temp folder, or a
//! new PostgreSQL database on the server of `IDEM_TEST_POSTGRES_URL` (default: this
//! machine's, as user postgres). Each is removed when the value is dropped, even when the
//! test fails.

use sqlx::{Connection, PgConnection};
use std::path::PathBuf;
use uuid::Uuid;

/// Which database a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server tests create their databases on.
pub fn postgres_server_url() -> String {
    std::env::var("IDEM_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database that exists for the lifetime of this value.
pub struct TestDatabase {
    url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    /// A SQLite file and the folder made for it alone.
    Folder {
        folder: PathBuf,
        file: PathBuf,
    },
    PostgresDatabase {
        server: String,
        name: String,
    },
}

impl TestDatabase {
    /// Creates an empty database of the given kind.
    pub async fn create(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => Self::sqlite(),
            Backend::Postgres => Self::postgres().await,
        }
    }

    /// A file in a folder of its own, removed with the folder: a server or pool that
    /// outlives its test and connects again then fails instead of leaving an empty file.
    fn sqlite() -> Self {
        let folder = std::env::temp_dir().join(format!("idem-test-{}", Uuid::new_v4().simple()));
        std::fs::create_dir(&folder)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", folder.display()));
        let file = folder.join("idem.db");
        Self {
            url: format!("sqlite://{}", file.display()),
            cleanup: Cleanup::Folder { folder, file },
        }
    }

    async fn postgres() -> Self {
        let server = postgres_server_url();
        Self::postgres_on(&server)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL for tests is not usable at {server}: {e}"))
    }

    /// Creates an empty database on this PostgreSQL server (given by any database URL on it).
    pub async fn postgres_on(server: &str) -> Result<Self, sqlx::Error> {
        let name = format!("idem_test_{}", Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(server).await?;
        sqlx::query(&format!("create database {name}"))
            .execute(&mut admin)
            .await?;
        Ok(Self {
            url: database_url_on(server, &name),
            cleanup: Cleanup::PostgresDatabase {
                server: server.to_owned(),
                name,
            },
        })
    }

    /// The URL to open it with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Leaves the database in place, no longer dropped with this value; answers its URL.
    pub fn keep(self) -> String {
        let kept = std::mem::ManuallyDrop::new(self);
        kept.url.clone()
    }

    /// The path of a SQLite database file.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match &self.cleanup {
            Cleanup::Folder { file, .. } => Some(file),
            Cleanup::PostgresDatabase { .. } => None,
        }
    }
}

/// The server URL with its database name replaced.
fn database_url_on(server: &str, name: &str) -> String {
    let (base, query) = server
        .split_once('?')
        .map_or((server, None), |(b, q)| (b, Some(q)));
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Folder { folder, .. } => {
                let _ = std::fs::remove_dir_all(folder);
            }
            Cleanup::PostgresDatabase { server, name } => {
                // Drop runs inside the test's runtime, which cannot be blocked on; a short-lived
                // thread with its own runtime does the async work.
                let (server, name) = (server.clone(), name.clone());
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    if let Ok(runtime) = runtime {
                        runtime.block_on(async {
                            if let Ok(mut admin) = PgConnection::connect(&server).await {
                                let drop = format!("drop database if exists {name} with (force)");
                                let _ = sqlx::query(&drop).execute(&mut admin).await;
                            }
                        });
                    }
                })
                .join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::database_url_on;

    #[test]
    fn the_database_name_is_replaced_keeping_the_rest() {
        let cases = [
            (
                "postgres://postgres@127.0.0.1:5432/postgres",
                "postgres://postgres@127.0.0.1:5432/t1",
            ),
            (
                "postgres://u:p@h/db?sslmode=disable",
                "postgres://u:p@h/t1?sslmode=disable",
            ),
            ("postgres://u@h:5432", "postgres://u@h:5432/t1"),
        ];
        for (server, expected) in cases {
            assert_eq!(database_url_on(server, "t1"), expected);
        }
    }
}
