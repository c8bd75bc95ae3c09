//! API keys and tool policies are reused for a moment after they are read (`--read-cache-ms`,
//! default 1000): a change through the same server applies at once, a change made elsewhere
//! (another server, the command line) once the cached copy is that old — never later.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

use crate::cli::idem;
use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;
use app::domain::Role;

on_both_databases!(
    a_key_revoked_through_this_server_is_refused_by_the_next_request,
    a_tool_changed_through_this_server_governs_the_next_claim,
    a_key_revoked_on_the_command_line_is_refused_once_the_cached_copy_is_a_second_old,
    with_the_cache_off_a_key_revoked_elsewhere_is_refused_at_once,
);

/// More than the default cache age (1 s) plus the slowest test machine's request.
const CONVERGENCE: Duration = Duration::from_secs(5);

async fn a_key_revoked_through_this_server_is_refused_by_the_next_request(db: Db) {
    let app = TestApp::spawn(db).await;
    let key = app.api_key("support-bot").await;
    let agent = app.agent_with_key(&key);
    // Used, hence cached, before the revocation.
    assert_eq!(agent.me().await.status(), 200);
    assert_eq!(agent.me().await.status(), 200);
    let id = key_id(&app).await;
    let admin = app.person(Role::Admin).await;
    assert_eq!(admin.revoke_key(&id).await.status(), 204);

    assert_error(agent.me().await, 401, "unauthorized").await;
    let claim = agent.claim(&refund("after-revoke")).await;
    assert_error(claim, 401, "unauthorized").await;
}

async fn a_tool_changed_through_this_server_governs_the_next_claim(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("support-bot").await;
    // Unregistered: a non-idempotent write that starts at once; its policy is now cached.
    assert_eq!(agent.claim(&refund("before")).await.status(), 201);

    let admin = app.person(Role::Admin).await;
    let irreversible = json!({ "effect": "irreversible" });
    assert_eq!(admin.put_tool("refund", &irreversible).await.status(), 200);

    let waiting = agent.claim(&refund("after")).await;
    assert_eq!(waiting.status(), 202, "the new policy asks for approval");
    let body: Value = waiting.json().await.unwrap();
    assert_eq!(body["operation"]["effect"], "irreversible");
    assert_eq!(body["operation"]["status"], "awaiting_approval");
}

async fn a_key_revoked_on_the_command_line_is_refused_once_the_cached_copy_is_a_second_old(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = used_then_revoked_on_the_command_line(&app).await;
    let took = time_until_refused(&agent).await;
    assert!(
        took < CONVERGENCE,
        "a revocation made elsewhere applies once the cached key is 1 s old (took {took:?})"
    );
}

async fn with_the_cache_off_a_key_revoked_elsewhere_is_refused_at_once(db: Db) {
    let app = TestApp::spawn_with(db, |config| config.read_cache_ms = 0).await;
    let agent = used_then_revoked_on_the_command_line(&app).await;
    assert_error(agent.me().await, 401, "unauthorized").await;
}

/// An agent whose key was used (so read, and cached if caching is on), then revoked with
/// `idem keys revoke`, another process.
async fn used_then_revoked_on_the_command_line(app: &TestApp) -> Client {
    let key = app.api_key("support-bot").await;
    let agent = app.agent_with_key(&key);
    assert_eq!(agent.me().await.status(), 200);
    let id = key_id(app).await;
    let revoked = idem(&["keys", "revoke", &id], app.database.url(), None);
    assert!(revoked.status.success(), "{revoked:?}");
    agent
}

/// Two servers on one PostgreSQL database, each with its own caches: a key revoked and a
/// tool changed through the first reach the second within the cache's age.
#[tokio::test]
async fn postgres_changes_through_one_server_reach_the_other_within_the_cache_age() {
    let app = TestApp::spawn(Db::Postgres).await;
    let other = app.spawn_beside(|_| {}).await;
    let key = app.api_key("support-bot").await;
    let agent = Client::with_bearer(&other.address, &key);
    assert_eq!(agent.claim(&refund("before")).await.status(), 201);

    let admin = app.person(Role::Admin).await;
    let irreversible = json!({ "effect": "irreversible" });
    assert_eq!(admin.put_tool("refund", &irreversible).await.status(), 200);
    let started = Instant::now();
    let mut step = 0;
    let status = loop {
        step += 1;
        let status = agent
            .claim(&refund(&format!("after-{step}")))
            .await
            .status();
        if status == 202 || started.elapsed() > CONVERGENCE {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 202, "the other server applies the new policy");

    let id = key_id(&app).await;
    assert_eq!(admin.revoke_key(&id).await.status(), 204);
    let took = time_until_refused(&agent).await;
    assert!(took < CONVERGENCE, "took {took:?}");
}

fn refund(key: &str) -> Value {
    json!({ "tool": "refund", "key": key, "args": { "order": key } })
}

async fn key_id(app: &TestApp) -> String {
    let keys = app.state.identity.list_api_keys().await.unwrap();
    keys[0].id.to_string()
}

/// Asks `/auth/me` until the key is refused; how long that took. Panics on anything but
/// 200 or 401.
async fn time_until_refused(agent: &Client) -> Duration {
    let started = Instant::now();
    loop {
        let status = agent.me().await.status().as_u16();
        match status {
            401 => return started.elapsed(),
            200 if started.elapsed() < CONVERGENCE => {}
            other => panic!("answered {other} after {:?}", started.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
