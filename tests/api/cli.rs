//! The `idem` binary itself, as an operator runs it.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};

use crate::helpers::{Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    keys_create_prints_only_the_key_and_the_key_works,
    users_create_reads_the_password_from_stdin,
    bad_arguments_fail_with_a_message_and_change_nothing,
    serve_answers_and_stops_cleanly_on_sigterm,
    users_are_disabled_enabled_re_roled_and_deleted_by_username,
);

/// Runs the `idem` binary on the database, with `stdin` as its input.
pub fn idem(args: &[&str], database_url: &str, stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_DATABASE_URL", database_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idem");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        // A command that refuses its arguments may exit before it reads stdin (broken pipe).
        let _ = input.write_all(text.as_bytes());
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

async fn keys_create_prints_only_the_key_and_the_key_works(db: Db) {
    let app = TestApp::spawn(db).await;
    let output = idem(
        &["keys", "create", "--namespace", "demo", "--name", "cli"],
        app.database.url(),
        None,
    );
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 1, "{printed:?}");
    assert!(lines[0].starts_with("idem_"));

    let me: Value = app
        .agent_with_key(lines[0])
        .me()
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["agent"]["namespace"], "demo");

    let listed = stdout(&idem(&["keys", "list"], app.database.url(), None));
    assert!(
        listed.contains("demo") && listed.contains("cli") && !listed.contains(lines[0]),
        "{listed}"
    );
}

async fn users_create_reads_the_password_from_stdin(db: Db) {
    let app = TestApp::spawn(db).await;
    let args = [
        "users",
        "create",
        "--username",
        "olga",
        "--role",
        "operator",
        "--password-stdin",
    ];
    let output = idem(&args, app.database.url(), Some("olga's password\n"));
    assert!(output.status.success(), "{output:?}");

    assert_eq!(
        app.anonymous()
            .login("olga", "olga's password")
            .await
            .status(),
        200
    );
    let listed = stdout(&idem(&["users", "list"], app.database.url(), None));
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("olga") && line.ends_with("operator")),
        "{listed}"
    );

    let args = [
        "users",
        "set-password",
        "--username",
        "olga",
        "--password-stdin",
    ];
    assert!(
        idem(&args, app.database.url(), Some("olga's new password\n"))
            .status
            .success()
    );
    assert_eq!(
        app.anonymous()
            .login("olga", "olga's password")
            .await
            .status(),
        401
    );
    assert_eq!(
        app.anonymous()
            .login("olga", "olga's new password")
            .await
            .status(),
        200
    );
}

async fn bad_arguments_fail_with_a_message_and_change_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let cases: [(&[&str], Option<&str>); 4] = [
        (
            &[
                "users",
                "create",
                "--username",
                "x",
                "--role",
                "root",
                "--password-stdin",
            ],
            Some("long password\n"),
        ),
        (
            &[
                "users",
                "create",
                "--username",
                "x",
                "--role",
                "viewer",
                "--password-stdin",
            ],
            Some(""),
        ),
        (&["keys", "create", "--namespace", "bad namespace"], None),
        (
            &["keys", "revoke", "00000000-0000-0000-0000-000000000000"],
            None,
        ),
    ];
    for (args, stdin) in cases {
        let output = idem(args, app.database.url(), stdin);
        assert!(!output.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
    assert_eq!(
        app.state.identity.list_users().await.unwrap().len(),
        1,
        "only the bootstrap admin"
    );
    assert!(app.state.identity.list_api_keys().await.unwrap().is_empty());
}

async fn serve_answers_and_stops_cleanly_on_sigterm(db: Db) {
    let database = idem::storage::testing::TestDatabase::create(db).await;
    let mut server = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("IDEM_DATABASE_URL", database.url())
        .env("IDEM_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(server.stderr.take().unwrap()).lines();
    let mut printed = Vec::new();
    // Lines end when the process does, so a server that never says where it listens fails
    // this loop instead of hanging it.
    let address = loop {
        let Some(Ok(line)) = log.next() else {
            let _ = server.kill();
            panic!("the server exited without saying where it listens: {printed:?}");
        };
        printed.push(line.clone());
        if let Some(rest) = line.split("address=").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
        if printed.len() > 200 {
            let _ = server.kill();
            panic!("no listening address in the first 200 log lines: {printed:?}");
        }
    };
    assert!(
        printed
            .iter()
            .any(|line| line.contains("created the first user")),
        "the log says the first admin was made: {printed:?}"
    );
    let mut out = BufReader::new(server.stdout.take().unwrap()).lines();
    let announced = out.next().unwrap().unwrap();
    let prefix = format!("first start: sign in at http://{address}/login as admin with password ");
    let password = announced
        .strip_prefix(&prefix)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("the first admin's password on stdout: {announced:?}"))
        .to_owned();
    assert!(password.len() >= 16, "{announced}");
    assert!(
        printed.iter().all(|line| !line.contains(&password)),
        "the password is never in the log: {printed:?}"
    );

    let health = reqwest::get(format!("http://{address}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || server.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    let rest: Vec<String> = log.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|line| line.contains("idem stopped")),
        "{rest:?}"
    );

    // Checked once the server has stopped, so that a failure leaves no server behind.
    let warned = printed
        .iter()
        .any(|line| line.contains("autovacuum is off"));
    assert_eq!(
        warned,
        autovacuum_off(db, database.url()).await,
        "the log warns when PostgreSQL's autovacuum is off, and only then: {printed:?}"
    );
}

/// Whether the database is a PostgreSQL whose server runs without autovacuum (or without
/// the counts it goes by).
async fn autovacuum_off(db: Db, database_url: &str) -> bool {
    if db == Db::Sqlite {
        return false;
    }
    let pool = sqlx::PgPool::connect(database_url).await.unwrap();
    let off: bool = sqlx::query_scalar(
        "select current_setting('autovacuum') = 'off' or current_setting('track_counts') = 'off'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    off
}

async fn users_are_disabled_enabled_re_roled_and_deleted_by_username(db: Db) {
    use app::domain::Role;
    let app = TestApp::spawn(db).await;
    let url = app.database.url();
    app.create_person("olga", Role::Viewer, "olga's password")
        .await;
    let olga = app.anonymous();
    assert_eq!(olga.login("olga", "olga's password").await.status(), 200);
    let run = |args: &[&str]| idem(args, url, None);

    let disabled = run(&["users", "disable", "--username", "olga"]);
    assert!(disabled.status.success(), "{disabled:?}");
    assert_eq!(olga.me().await.status(), 401, "her session ended");
    let login = app.anonymous().login("olga", "olga's password").await;
    assert_eq!(login.status(), 401);
    assert!(run(&["users", "enable", "--username", "olga"])
        .status
        .success());
    assert_eq!(olga.login("olga", "olga's password").await.status(), 200);

    let set_role = [
        "users",
        "set-role",
        "--username",
        "olga",
        "--role",
        "approver",
    ];
    assert!(run(&set_role).status.success());
    let listed = stdout(&run(&["users", "list"]));
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("olga") && line.ends_with("approver")),
        "{listed}"
    );

    assert!(run(&["users", "delete", "--username", "olga"])
        .status
        .success());
    assert_eq!(olga.me().await.status(), 401);
    let again = run(&["users", "delete", "--username", "olga"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no user named olga"));

    // The bootstrap admin is the only admin: it stays.
    let last = run(&[
        "users",
        "set-role",
        "--username",
        "admin",
        "--role",
        "viewer",
    ]);
    assert!(!last.status.success());
    assert!(String::from_utf8_lossy(&last.stderr).contains("last enabled admin"));
    let bad_role = run(&["users", "set-role", "--username", "admin", "--role", "root"]);
    assert!(!bad_role.status.success());

    let events = app.state.audit.page(None, 200).await.unwrap().0;
    let by_cli: Vec<&str> = events
        .iter()
        .filter(|event| event.actor == "cli" && event.subject == "user:olga")
        .map(|event| event.action.as_str())
        .collect();
    for action in [
        "user.disabled",
        "user.enabled",
        "user.role_changed",
        "user.deleted",
    ] {
        assert!(by_cli.contains(&action), "{action} in {by_cli:?}");
    }
}
