use app::domain::Role;
use serde_json::Value;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    signing_in_with_the_right_password_opens_a_strict_http_only_session,
    a_wrong_password_and_an_unknown_user_get_the_same_401,
    signing_out_ends_the_session_even_for_a_copied_cookie,
    changing_the_password_ends_existing_sessions,
    an_api_key_identifies_its_agent_and_namespace,
    revoked_and_made_up_api_keys_are_refused,
    no_credentials_is_401_in_the_error_shape,
    the_first_start_creates_one_admin_and_a_restart_does_not,
);

async fn signing_in_with_the_right_password_opens_a_strict_http_only_session(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Approver, "correct horse battery")
        .await;
    let client = app.anonymous();

    let response = client.login("ada", "correct horse battery").await;
    assert_eq!(response.status(), 200);
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("idem_session="), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain http is not Secure: {cookie}"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["username"], "ada");
    assert_eq!(body["user"]["role"], "approver");
    assert!(body["user"].get("password_hash").is_none());

    let me: Value = client.me().await.json().await.unwrap();
    assert_eq!(me["user"]["username"], "ada");
}

async fn a_wrong_password_and_an_unknown_user_get_the_same_401(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Viewer, "correct horse battery")
        .await;
    let client = app.anonymous();

    let wrong = assert_error(
        client.login("ada", "wrong horse").await,
        401,
        "unauthorized",
    )
    .await;
    let unknown = assert_error(
        client.login("nobody", "wrong horse").await,
        401,
        "unauthorized",
    )
    .await;
    let malformed = assert_error(client.login("not a name!", "x").await, 401, "unauthorized").await;
    assert_eq!(wrong, unknown);
    assert_eq!(wrong, malformed);
    assert_error(client.me().await, 401, "unauthorized").await;
}

async fn signing_out_ends_the_session_even_for_a_copied_cookie(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Operator, "correct horse battery")
        .await;
    let client = app.anonymous();
    let response = client.login("ada", "correct horse battery").await;
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();

    let logout = client.logout().await;
    assert_eq!(logout.status(), 204);
    let cleared = logout.headers()["set-cookie"].to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");

    // Someone who kept a copy of the cookie gets nothing either.
    let replayed = app
        .anonymous()
        .http
        .get(app.anonymous().url("/auth/me"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_error(replayed, 401, "unauthorized").await;
}

async fn changing_the_password_ends_existing_sessions(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Operator, "correct horse battery")
        .await;
    let client = app.anonymous();
    assert_eq!(
        client.login("ada", "correct horse battery").await.status(),
        200
    );
    assert_eq!(client.me().await.status(), 200);

    let ada = "ada".try_into().unwrap();
    app.state
        .identity
        .set_password(&ada, "a brand new password")
        .await
        .unwrap();

    assert_error(client.me().await, 401, "unauthorized").await;
    assert_error(
        client.login("ada", "correct horse battery").await,
        401,
        "unauthorized",
    )
    .await;
    assert_eq!(
        client.login("ada", "a brand new password").await.status(),
        200
    );
}

async fn an_api_key_identifies_its_agent_and_namespace(db: Db) {
    let app = TestApp::spawn(db).await;
    let key = app.api_key("support-bot").await;
    assert!(key.starts_with("idem_"));

    let me: Value = app.agent_with_key(&key).me().await.json().await.unwrap();
    assert_eq!(me["agent"]["namespace"], "support-bot");
    assert_eq!(me["agent"]["key_name"], "test");

    let keys = app.state.identity.list_api_keys().await.unwrap();
    assert!(keys[0].last_used_at.is_some(), "use of a key is recorded");
}

async fn revoked_and_made_up_api_keys_are_refused(db: Db) {
    let app = TestApp::spawn(db).await;
    let key = app.api_key("support-bot").await;
    let id = app.state.identity.list_api_keys().await.unwrap()[0].id;
    app.state.identity.revoke_api_key(id).await.unwrap();

    assert_error(app.agent_with_key(&key).me().await, 401, "unauthorized").await;
    let made_up = format!("idem_{}", "A".repeat(43));
    assert_error(app.agent_with_key(&made_up).me().await, 401, "unauthorized").await;
}

async fn no_credentials_is_401_in_the_error_shape(db: Db) {
    let app = TestApp::spawn(db).await;
    let response = app.anonymous().me().await;
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_error(response, 401, "unauthorized").await;
    let wrong_scheme = app
        .anonymous()
        .http
        .get(app.anonymous().url("/auth/me"))
        .header("authorization", "Basic YTpi")
        .send()
        .await
        .unwrap();
    assert_error(wrong_scheme, 401, "unauthorized").await;
}

async fn the_first_start_creates_one_admin_and_a_restart_does_not(db: Db) {
    let database = idem::storage::testing::TestDatabase::create(db).await;
    let config = idem::config::ServeConfig::for_tests(database.url());
    let first = idem::startup::Application::build(config.clone())
        .await
        .unwrap();
    let users = first.state().identity.list_users().await.unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].username.as_str(), "admin");
    assert_eq!(users[0].role, Role::Admin);
    // Stopped (it never ran): a SQLite file is served by one server at a time.
    drop(first);

    let again = idem::startup::Application::build(config).await.unwrap();
    assert_eq!(again.state().identity.list_users().await.unwrap().len(), 1);
}
