//! Provider keys: what idem sends a provider as its idempotency key is each operation's own
//! (`provider_key`), never the caller's key, so two namespaces or two generations of one key
//! never meet at a provider that deduplicates. And lease tokens are stored as digests only.

use serde_json::{json, Value};
use std::time::Duration;

use crate::faults::{sandbox_rig, wait_for_status};
use crate::helpers::{Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    two_namespaces_with_one_key_get_two_effects_and_their_own_results,
    reconciling_one_namespace_never_settles_from_another_namespaces_effect,
    every_attempt_of_an_operation_reaches_the_provider_under_one_key,
    a_key_claimed_again_after_it_expired_gets_a_new_provider_key,
    lease_tokens_are_stored_as_their_digest,
);

fn refund() -> Value {
    json!({ "key": "refund:order-1234", "args": { "order_id": "1234", "amount_cents": 500 } })
}

fn provider_key(operation: &Value) -> &str {
    operation["provider_key"]
        .as_str()
        .unwrap_or_else(|| panic!("no provider_key in {operation}"))
}

async fn two_namespaces_with_one_key_get_two_effects_and_their_own_results(db: Db) {
    let (provider, app, shop_a) = sandbox_rig(db, "refund", 2000, "shop-a").await;
    let shop_b = app.agent("shop-b").await;

    let mut refunds = Vec::new();
    for agent in [&shop_a, &shop_b] {
        let response = agent.invoke("refund", &refund()).await;
        assert_eq!(response.status(), 201);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["operation"]["status"], "succeeded", "{body}");
        refunds.push(body["operation"].clone());
    }
    let [a, b] = [&refunds[0], &refunds[1]];
    assert_ne!(provider_key(a), provider_key(b));
    assert_eq!(
        provider_key(a),
        format!("idem_{}", a["id"].as_str().unwrap())
    );
    assert_ne!(
        a["result"]["id"], b["result"]["id"],
        "each namespace's refund is its own effect, not a replay of the other's"
    );
    assert_eq!(provider.total().await, 2);
    assert_eq!(provider.effects_of_operation(a).await, 1);
    assert_eq!(provider.effects_of_operation(b).await, 1);
    assert_eq!(provider.effects_of("refund:order-1234").await, 0);
}

async fn reconciling_one_namespace_never_settles_from_another_namespaces_effect(db: Db) {
    let (provider, app, shop_a) = sandbox_rig(db, "refund", 2000, "shop-a").await;
    let shop_b = app.agent("shop-b").await;
    let response = shop_a.invoke("refund", &refund()).await;
    assert_eq!(response.status(), 201);

    // B's call never reaches the provider's ledger: B is unknown, and the lookup by B's own
    // provider key finds nothing, although A's refund of the same key is there.
    provider
        .fault(json!({ "fault": "drop_before_commit", "action": "refund" }))
        .await;
    let invoked: Value = shop_b
        .invoke("refund", &refund())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(invoked["operation"]["status"], "unknown", "{invoked}");
    let id = invoked["operation"]["id"].as_str().unwrap();
    let settled = wait_for_status(&shop_b, id, "failed").await;
    assert_eq!(settled["retryable"], true, "{settled}");
    assert_eq!(settled["result"], Value::Null);
    assert_eq!(provider.total().await, 1, "only A's refund happened");
}

async fn every_attempt_of_an_operation_reaches_the_provider_under_one_key(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(app::domain::Role::Admin).await;
    let policy = json!({ "effect": "idempotent_write", "lease_seconds": 1 });
    assert_eq!(admin.put_tool("upsert", &policy).await.status(), 200);
    let agent = app.agent("profiles").await;
    let upsert = json!({ "tool": "upsert", "key": "profile:1", "args": { "name": "Ada" } });

    let (id, _, first) = agent.start(&upsert).await;
    // The agent that claimed it goes quiet; its lease runs out and the retry takes over.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (again, _, second) = agent.start(&upsert).await;
    assert_eq!(again, id);
    assert_eq!(second["operation"]["attempt"], 2);
    assert_eq!(
        provider_key(&second["operation"]),
        provider_key(&first["operation"])
    );
}

async fn a_key_claimed_again_after_it_expired_gets_a_new_provider_key(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("billing").await;
    let operator = app.person(app::domain::Role::Operator).await;
    let claim =
        json!({ "tool": "refund", "key": "refund:order-1234", "args": { "order_id": "1234" } });
    let (id, token, first) = agent.start(&claim).await;
    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": { "ok": true } });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    let reason = json!({ "reason": "the customer asked for a second refund" });
    assert_eq!(operator.expire(&id, &reason).await.status(), 200);

    let (new_id, _, second) = agent.start(&claim).await;
    assert_ne!(new_id, id);
    assert_ne!(
        provider_key(&second["operation"]),
        provider_key(&first["operation"])
    );
}

async fn lease_tokens_are_stored_as_their_digest(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("billing").await;
    let claim = json!({ "tool": "refund", "key": "refund:1", "args": { "order_id": "1" } });
    let (id, token, _) = agent.start(&claim).await;

    let stored = stored_lease_token(app.database.url(), &id).await;
    assert_ne!(stored, token);
    assert_eq!(stored, app::domain::sha256_hex(&token));
    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": { "ok": true } });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
}

/// The `lease_token` column of an operation, read straight from the database.
async fn stored_lease_token(url: &str, id: &str) -> String {
    let id = uuid::Uuid::parse_str(id).unwrap();
    let select = "select lease_token from operations where id = $1";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let token = sqlx::query_scalar(select).bind(id).fetch_one(&pool).await;
        pool.close().await;
        token.unwrap()
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let token = sqlx::query_scalar(select).bind(id).fetch_one(&pool).await;
        pool.close().await;
        token.unwrap()
    }
}

/// Leases stored in clear before tokens were hashed are hashed when the database is opened
/// (SQLite computes no SHA-256 in SQL; PostgreSQL's migration does it in SQL).
#[tokio::test]
async fn sqlite_lease_tokens_stored_in_clear_are_hashed_when_the_database_opens() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let agent = app.agent("billing").await;
    let claim = json!({ "tool": "refund", "key": "refund:2", "args": { "order_id": "2" } });
    let (id, token, _) = agent.start(&claim).await;
    let url = app.database.url();
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let uuid = uuid::Uuid::parse_str(&id).unwrap();
    sqlx::query("update operations set lease_token = $1 where id = $2")
        .bind(&token)
        .bind(uuid)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("insert into lease_tokens_in_clear (operation_id) values ($1)")
        .bind(uuid)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let reopened = idem::storage::Database::open(url).await.unwrap();
    assert_eq!(
        stored_lease_token(url, &id).await,
        app::domain::sha256_hex(&token)
    );
    reopened.close().await;
}

/// PostgreSQL's migration hashes the tokens stored in clear in SQL: with the same digest, in
/// the same spelling, as the ledger compares them by.
#[tokio::test]
async fn postgres_hashes_a_lease_token_in_sql_as_the_ledger_does() {
    let database = idem::storage::testing::TestDatabase::create(Db::Postgres).await;
    let pool = sqlx::PgPool::connect(database.url()).await.unwrap();
    let token = app::identity::random_token();
    let migration = include_str!("../../migrations/postgres/20261205000000_provider_keys.sql");
    let in_sql = "encode(sha256(convert_to(lease_token, 'UTF8')), 'hex')";
    assert!(
        migration.contains(in_sql),
        "the migration hashes as this test does"
    );
    let hashed: String = sqlx::query_scalar(&format!(
        "select {} from (select $1::text as lease_token) as stored",
        in_sql
    ))
    .bind(&token)
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(hashed, app::domain::sha256_hex(&token));
    assert!(app::ledger::LeaseTokenHash::of(&token).matches(&token));
}
