use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    an_admin_creates_a_key_that_is_shown_once_and_works,
    revoking_a_key_locks_its_agent_out,
    only_admins_manage_keys_and_users,
    an_admin_creates_people_who_can_then_sign_in,
    invalid_names_roles_and_passwords_are_400_and_store_nothing,
);

async fn an_admin_creates_a_key_that_is_shown_once_and_works(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;

    let response = admin
        .create_key(&json!({ "namespace": "billing", "name": "billing harness" }))
        .await;
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let key = created["key"].as_str().unwrap();
    assert!(key.starts_with("idem_"));
    assert_eq!(created["api_key"]["namespace"], "billing");
    assert!(key.starts_with(created["api_key"]["prefix"].as_str().unwrap()));

    let listed: Value = admin.list_keys().await.json().await.unwrap();
    let listed_text = listed.to_string();
    assert!(!listed_text.contains(key), "the secret is never listed");
    assert_eq!(listed["api_keys"][0]["name"], "billing harness");

    let me: Value = app.agent_with_key(key).me().await.json().await.unwrap();
    assert_eq!(me["agent"]["namespace"], "billing");
}

async fn revoking_a_key_locks_its_agent_out(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let created: Value = admin
        .create_key(&json!({ "namespace": "billing" }))
        .await
        .json()
        .await
        .unwrap();
    let key = created["key"].as_str().unwrap();
    let id = created["api_key"]["id"].as_str().unwrap();
    assert_eq!(app.agent_with_key(key).me().await.status(), 200);

    assert_eq!(admin.revoke_key(id).await.status(), 204);
    assert_error(app.agent_with_key(key).me().await, 401, "unauthorized").await;
    assert_eq!(
        admin.revoke_key(id).await.status(),
        204,
        "revoking twice is harmless"
    );
    let listed: Value = admin.list_keys().await.json().await.unwrap();
    assert!(listed["api_keys"][0]["revoked_at"].is_string());

    assert_error(
        admin.revoke_key(&uuid::Uuid::new_v4().to_string()).await,
        404,
        "not_found",
    )
    .await;
    assert_error(admin.revoke_key("not-a-uuid").await, 404, "not_found").await;
}

async fn only_admins_manage_keys_and_users(db: Db) {
    let app = TestApp::spawn(db).await;
    let callers: Vec<(&str, Client, u16)> = vec![
        ("nobody", app.anonymous(), 401),
        ("agent", app.agent("billing").await, 403),
        ("viewer", app.person(Role::Viewer).await, 403),
        ("operator", app.person(Role::Operator).await, 403),
        ("approver", app.person(Role::Approver).await, 403),
    ];
    for (who, client, status) in &callers {
        let code = if *status == 401 {
            "unauthorized"
        } else {
            "forbidden"
        };
        let attempts = [
            client.create_key(&json!({ "namespace": "billing" })).await,
            client.list_keys().await,
            client.revoke_key(&uuid::Uuid::new_v4().to_string()).await,
            client.create_user(&json!({ "username": "mallory", "role": "admin", "password": "long enough pw" })).await,
            client.list_users().await,
        ];
        for response in attempts {
            let url = response.url().to_string();
            assert_eq!(response.status(), *status, "{who} on {url}");
            assert_error(response, *status, code).await;
        }
    }
    let keys = app.state.identity.list_api_keys().await.unwrap();
    assert_eq!(keys.len(), 1, "only the agent's own key exists");
    let mallory = "mallory".try_into().unwrap();
    assert!(app
        .state
        .identity
        .list_users()
        .await
        .unwrap()
        .iter()
        .all(|u| u.username != mallory));
}

async fn an_admin_creates_people_who_can_then_sign_in(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let response = admin
        .create_user(
            &json!({ "username": "olga", "role": "operator", "password": "olga's long password" }),
        )
        .await;
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["user"]["role"], "operator");

    let again = admin
        .create_user(
            &json!({ "username": "olga", "role": "viewer", "password": "another password" }),
        )
        .await;
    assert_error(again, 409, "username_taken").await;

    let olga = app.anonymous();
    assert_eq!(
        olga.login("olga", "olga's long password").await.status(),
        200
    );
    let users: Value = admin.list_users().await.json().await.unwrap();
    let names: Vec<&str> = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"olga") && names.contains(&"admin"),
        "{names:?}"
    );
}

async fn invalid_names_roles_and_passwords_are_400_and_store_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let before = app.state.identity.list_users().await.unwrap().len();
    let cases = [
        (
            json!({ "username": "has space", "role": "viewer", "password": "long enough pw" }),
            "invalid_username",
        ),
        (
            json!({ "username": "vera", "role": "root", "password": "long enough pw" }),
            "invalid_role",
        ),
        (
            json!({ "username": "vera", "role": "viewer", "password": "short" }),
            "weak_password",
        ),
        (
            json!({ "username": "vera", "role": "viewer" }),
            "invalid_request",
        ),
    ];
    for (body, code) in cases {
        assert_error(admin.create_user(&body).await, 400, code).await;
    }
    assert_eq!(app.state.identity.list_users().await.unwrap().len(), before);

    assert_error(
        admin
            .create_key(&json!({ "namespace": "no spaces allowed" }))
            .await,
        400,
        "invalid_namespace",
    )
    .await;
    assert_error(
        admin.create_key(&json!({ "namespace": "" })).await,
        400,
        "invalid_namespace",
    )
    .await;
    assert_error(
        admin
            .create_key(&json!({ "namespace": "ok", "name": "x".repeat(200) }))
            .await,
        400,
        "invalid_request",
    )
    .await;
    assert!(app.state.identity.list_api_keys().await.unwrap().is_empty());
}
