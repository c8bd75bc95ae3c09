//! Where `--demo` refuses to start: a database with real data, an address beyond loopback,
//! an https public URL. Each refusal exits non-zero before serving, says how to start a demo,
//! and leaves the database as it was.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cli::idem;
use crate::helpers::Db;
use crate::on_both_databases;
use crate::processes::cli_key;
use idem::storage::testing::{Backend, TestDatabase};

on_both_databases!(
    the_demo_refuses_a_database_with_real_people_and_leaves_it_as_it_was,
    the_demo_refuses_a_database_with_only_an_api_key_even_of_its_namespace,
);

/// What every refusal tells the reader to do instead.
const HOW_TO: &str = "idem serve --demo --database-url sqlite://idem-demo.db";

/// Runs `idem serve --demo` with the arguments and environment, expecting it to refuse and
/// exit; a server that starts instead is stopped and the test fails.
fn refused_demo(database_url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["serve", "--demo"])
        .args(args)
        .env("IDEM_DATABASE_URL", database_url)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idem serve --demo");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("--demo served instead of refusing: {output:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success(), "{output:?}");
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Everything a database holds, to compare before and after: a SQLite file byte for byte,
/// a PostgreSQL database as its tables and their rows.
async fn contents(database: &TestDatabase) -> Vec<String> {
    use sqlx::Connection;
    if let Some(path) = database.sqlite_path() {
        let bytes = std::fs::read(path).unwrap();
        return vec![format!("{:?}", bytes)];
    }
    let mut connection = sqlx::PgConnection::connect(database.url()).await.unwrap();
    let tables: Vec<(String,)> = sqlx::query_as(
        "select table_name::text from information_schema.tables \
         where table_schema = current_schema() order by 1",
    )
    .fetch_all(&mut connection)
    .await
    .unwrap();
    let mut seen = Vec::new();
    for (table,) in tables {
        let rows: Vec<(String,)> =
            sqlx::query_as(&format!("select t::text from {table} t order by 1"))
                .fetch_all(&mut connection)
                .await
                .unwrap();
        seen.push(format!("{table}: {rows:?}"));
    }
    seen
}

async fn the_demo_refuses_a_database_with_real_people_and_leaves_it_as_it_was(db: Db) {
    let database = TestDatabase::create(db).await;
    let create = [
        "users",
        "create",
        "--username",
        "olga",
        "--role",
        "admin",
        "--password-stdin",
    ];
    let made = idem(&create, database.url(), Some("olga's password\n"));
    assert!(made.status.success(), "{made:?}");
    let before = contents(&database).await;

    let output = refused_demo(database.url(), &["--bind", "127.0.0.1:0"], &[]);
    let message = stderr(&output);
    assert!(message.contains("people"), "{message}");
    assert!(message.contains("did not create"), "{message}");
    assert!(message.contains(HOW_TO), "{message}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("demo:"),
        "no password was printed: {output:?}"
    );
    assert_eq!(
        contents(&database).await,
        before,
        "the database is unchanged"
    );
}

async fn the_demo_refuses_a_database_with_only_an_api_key_even_of_its_namespace(db: Db) {
    let database = TestDatabase::create(db).await;
    let key = cli_key(database.url(), "demo");
    assert!(key.starts_with("idem_"));
    let before = contents(&database).await;

    let output = refused_demo(database.url(), &["--bind", "127.0.0.1:0"], &[]);
    let message = stderr(&output);
    assert!(message.contains("API keys"), "{message}");
    assert!(message.contains(HOW_TO), "{message}");
    assert_eq!(
        contents(&database).await,
        before,
        "the database is unchanged"
    );
}

#[tokio::test]
async fn the_demo_refuses_to_listen_beyond_loopback_and_touches_no_database() {
    let database = TestDatabase::create(Backend::Sqlite).await;
    for bind in ["0.0.0.0:0", "[::]:0"] {
        let output = refused_demo(database.url(), &["--bind", bind], &[]);
        let message = stderr(&output);
        assert!(message.contains("loopback"), "{message}");
        assert!(message.contains(HOW_TO), "{message}");
    }
    let path = database.sqlite_path().unwrap();
    assert!(!path.exists(), "no database file was created");
}

#[tokio::test]
async fn the_demo_refuses_an_https_public_url_and_touches_no_database() {
    let database = TestDatabase::create(Backend::Sqlite).await;
    let env = [("IDEM_PUBLIC_URL", "https://idem.example.com")];
    let output = refused_demo(database.url(), &["--bind", "127.0.0.1:0"], &env);
    let message = stderr(&output);
    assert!(message.contains("https"), "{message}");
    assert!(message.contains(HOW_TO), "{message}");
    assert!(!database.sqlite_path().unwrap().exists());
}
