//! Offboarding and own passwords: admins disable, enable, re-role and delete people (never the
//! last enabled admin); everyone changes their own password; the first admin must.

use app::domain::{Role, Username};
use reqwest::Response;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;
use crate::processes::ServerProcess;
use idem::storage::testing::TestDatabase;

on_both_databases!(
    a_disabled_person_is_signed_out_at_once_and_refused_like_a_wrong_password,
    an_admin_changes_a_role_and_deletes_a_person_whose_name_the_audit_keeps,
    the_last_enabled_admin_cannot_be_disabled_demoted_or_deleted,
    only_admins_change_people,
    bad_changes_are_400_or_404_and_change_nothing,
    changing_ones_own_password_ends_the_other_sessions_only,
    the_first_admin_must_change_the_printed_password_before_anything_else,
);

const PASSWORD: &str = "olga's long password";

async fn update_user(client: &Client, id: &str, body: &Value) -> Response {
    let url = client.url(&format!("/v1/users/{id}"));
    client.http.patch(url).json(body).send().await.unwrap()
}

async fn delete_user(client: &Client, id: &str) -> Response {
    let url = client.url(&format!("/v1/users/{id}"));
    client.http.delete(url).send().await.unwrap()
}

async fn change_password(client: &Client, current: &str, new: &str) -> Response {
    let body = json!({ "current_password": current, "new_password": new });
    client.post_json("/auth/password", &body).await
}

/// Creates `name` with the role, signed in; returns their client and id.
async fn signed_in(app: &TestApp, name: &str, role: Role) -> (Client, String) {
    app.create_person(name, role, PASSWORD).await;
    let client = app.anonymous();
    assert_eq!(client.login(name, PASSWORD).await.status(), 200);
    let username = Username::try_from(name).unwrap();
    let user = app.state.identity.user_by_username(&username).await;
    (client, user.unwrap().unwrap().id.to_string())
}

/// The audit events of this action, as `(actor, subject, detail)`.
async fn audited(admin: &Client, action: &str) -> Vec<(String, String, Value)> {
    let audit: Value = admin.audit("?limit=200").await.json().await.unwrap();
    audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["action"] == action)
        .map(|event| {
            let text = |key: &str| event[key].as_str().unwrap().to_owned();
            (text("actor"), text("subject"), event["detail"].clone())
        })
        .collect()
}

async fn a_disabled_person_is_signed_out_at_once_and_refused_like_a_wrong_password(db: Db) {
    let app = TestApp::spawn(db).await;
    let (admin, _) = signed_in(&app, "ada", Role::Admin).await;
    let (olga, id) = signed_in(&app, "olga", Role::Operator).await;
    assert_eq!(olga.me().await.status(), 200);

    let response = update_user(&admin, &id, &json!({ "disabled": true })).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["disabled"], true);
    assert_eq!(body["user"]["role"], "operator");
    assert_error(olga.me().await, 401, "unauthorized").await;

    let refused = assert_error(
        app.anonymous().login("olga", PASSWORD).await,
        401,
        "unauthorized",
    )
    .await;
    let wrong = assert_error(
        app.anonymous().login("olga", "not her password").await,
        401,
        "unauthorized",
    )
    .await;
    assert_eq!(
        refused, wrong,
        "a disabled person learns nothing more than a wrong password"
    );
    let listed: Value = admin.list_users().await.json().await.unwrap();
    let olga_listed = listed["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|user| user["username"] == "olga")
        .cloned()
        .unwrap();
    assert_eq!(olga_listed["disabled"], true);

    let response = update_user(&admin, &id, &json!({ "disabled": false })).await;
    assert_eq!(response.status(), 200);
    assert_eq!(app.anonymous().login("olga", PASSWORD).await.status(), 200);

    let by_ada = |events: Vec<(String, String, Value)>| {
        events
            .into_iter()
            .filter(|(actor, subject, _)| actor == "user:ada" && subject == "user:olga")
            .count()
    };
    assert_eq!(by_ada(audited(&admin, "user.disabled").await), 1);
    assert_eq!(by_ada(audited(&admin, "user.enabled").await), 1);
    let failed = audited(&admin, "login.failed").await;
    assert!(
        failed
            .iter()
            .any(|(_, subject, detail)| subject == "user:olga" && detail["reason"] == "disabled"),
        "{failed:?}"
    );
}

async fn an_admin_changes_a_role_and_deletes_a_person_whose_name_the_audit_keeps(db: Db) {
    let app = TestApp::spawn(db).await;
    let (admin, _) = signed_in(&app, "ada", Role::Admin).await;
    let (olga, id) = signed_in(&app, "olga", Role::Viewer).await;

    let response = update_user(&admin, &id, &json!({ "role": "approver" })).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["role"], "approver");
    let me: Value = olga.me().await.json().await.unwrap();
    assert_eq!(
        me["user"]["role"], "approver",
        "the session sees the new role"
    );

    assert_eq!(delete_user(&admin, &id).await.status(), 204);
    assert_error(olga.me().await, 401, "unauthorized").await;
    assert_error(
        app.anonymous().login("olga", PASSWORD).await,
        401,
        "unauthorized",
    )
    .await;
    assert_error(delete_user(&admin, &id).await, 404, "not_found").await;

    let changed = audited(&admin, "user.role_changed").await;
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0].1, "user:olga");
    assert_eq!(changed[0].2, json!({ "from": "viewer", "to": "approver" }));
    let deleted = audited(&admin, "user.deleted").await;
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(
        (deleted[0].0.as_str(), deleted[0].1.as_str()),
        ("user:ada", "user:olga")
    );
}

async fn the_last_enabled_admin_cannot_be_disabled_demoted_or_deleted(db: Db) {
    let app = TestApp::spawn(db).await;
    let (admin, ada) = signed_in(&app, "ada", Role::Admin).await;
    // The bootstrap `admin` is the other enabled admin; once disabled, ada is the last.
    let bootstrap = Username::try_from("admin").unwrap();
    let bootstrap = app
        .state
        .identity
        .user_by_username(&bootstrap)
        .await
        .unwrap()
        .unwrap();
    let response = update_user(
        &admin,
        &bootstrap.id.to_string(),
        &json!({ "disabled": true }),
    )
    .await;
    assert_eq!(response.status(), 200);

    for body in [json!({ "disabled": true }), json!({ "role": "operator" })] {
        let refused = assert_error(update_user(&admin, &ada, &body).await, 409, "last_admin").await;
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("last"),
            "{refused}"
        );
    }
    assert_error(delete_user(&admin, &ada).await, 409, "last_admin").await;
    let me: Value = admin.me().await.json().await.unwrap();
    assert_eq!(me["user"]["role"], "admin", "nothing changed");
    assert_eq!(me["user"]["disabled"], false);

    // With another enabled admin, the same change goes through.
    let response = update_user(
        &admin,
        &bootstrap.id.to_string(),
        &json!({ "disabled": false }),
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = update_user(&admin, &ada, &json!({ "role": "operator" })).await;
    assert_eq!(response.status(), 200);
}

async fn only_admins_change_people(db: Db) {
    let app = TestApp::spawn(db).await;
    let (_, id) = signed_in(&app, "olga", Role::Viewer).await;
    let operator = app.person(Role::Operator).await;
    let agent = app.agent("billing").await;
    let body = json!({ "disabled": true });
    for (caller, status, code) in [
        (&operator, 403, "forbidden"),
        (&agent, 403, "forbidden"),
        (&app.anonymous(), 401, "unauthorized"),
    ] {
        assert_error(update_user(caller, &id, &body).await, status, code).await;
        assert_error(delete_user(caller, &id).await, status, code).await;
    }
    assert_eq!(app.anonymous().login("olga", PASSWORD).await.status(), 200);
}

async fn bad_changes_are_400_or_404_and_change_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let (admin, _) = signed_in(&app, "ada", Role::Admin).await;
    let (_, id) = signed_in(&app, "olga", Role::Viewer).await;
    assert_error(
        update_user(&admin, &id, &json!({})).await,
        400,
        "invalid_request",
    )
    .await;
    assert_error(
        update_user(&admin, &id, &json!({ "role": "root" })).await,
        400,
        "invalid_role",
    )
    .await;
    assert_error(
        update_user(&admin, &id, &json!({ "disabled": "yes" })).await,
        400,
        "invalid_request",
    )
    .await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let body = json!({ "disabled": true });
    assert_error(update_user(&admin, &unknown, &body).await, 404, "not_found").await;
    assert_error(
        update_user(&admin, "not-an-id", &body).await,
        404,
        "not_found",
    )
    .await;
    assert_error(delete_user(&admin, &unknown).await, 404, "not_found").await;
    let olga = Username::try_from("olga").unwrap();
    let olga = app
        .state
        .identity
        .user_by_username(&olga)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((olga.role, olga.disabled), (Role::Viewer, false));
}

async fn changing_ones_own_password_ends_the_other_sessions_only(db: Db) {
    let app = TestApp::spawn(db).await;
    let (here, _) = signed_in(&app, "olga", Role::Viewer).await;
    let elsewhere = app.anonymous();
    assert_eq!(elsewhere.login("olga", PASSWORD).await.status(), 200);

    let wrong = change_password(&here, "not my password", "a brand new password").await;
    assert_error(wrong, 400, "wrong_current_password").await;
    assert_error(
        change_password(&here, PASSWORD, "short").await,
        400,
        "weak_password",
    )
    .await;
    assert_eq!(elsewhere.me().await.status(), 200, "refusals end nothing");

    let changed = change_password(&here, PASSWORD, "a brand new password").await;
    assert_eq!(changed.status(), 204);
    assert_eq!(here.me().await.status(), 200, "this session stays");
    assert_error(elsewhere.me().await, 401, "unauthorized").await;
    assert_error(
        app.anonymous().login("olga", PASSWORD).await,
        401,
        "unauthorized",
    )
    .await;
    assert_eq!(
        app.anonymous()
            .login("olga", "a brand new password")
            .await
            .status(),
        200
    );
    assert_error(
        change_password(
            &app.agent("billing").await,
            PASSWORD,
            "x".repeat(9).as_str(),
        )
        .await,
        403,
        "forbidden",
    )
    .await;
    assert_error(
        change_password(&app.anonymous(), PASSWORD, "a brand new password").await,
        401,
        "unauthorized",
    )
    .await;

    let admin = app.person(Role::Admin).await;
    let changes = audited(&admin, "user.password_changed").await;
    assert!(
        changes
            .iter()
            .any(|(actor, subject, _)| actor == "user:olga" && subject == "user:olga"),
        "{changes:?}"
    );
}

async fn the_first_admin_must_change_the_printed_password_before_anything_else(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let line = server
        .stdout_line(std::time::Duration::from_secs(10))
        .unwrap();
    let password = line
        .split("with password ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let admin = Client::anonymous(&server.address);
    let signed_in: Value = admin.login("admin", &password).await.json().await.unwrap();
    assert_eq!(signed_in["user"]["must_change_password"], true);

    for path in ["/v1/users", "/v1/operations", "/v1/tools", "/v1/audit"] {
        assert_error(admin.get(path).await, 403, "password_change_required").await;
    }
    let me: Value = admin.me().await.json().await.unwrap();
    assert_eq!(me["user"]["must_change_password"], true);

    let changed = change_password(&admin, &password, "the admin's own password").await;
    assert_eq!(changed.status(), 204);
    assert_eq!(admin.get("/v1/users").await.status(), 200);
    let me: Value = admin.me().await.json().await.unwrap();
    assert_eq!(me["user"]["must_change_password"], false);

    // A person made with a chosen password is not asked to change it.
    let created = admin
        .create_user(&json!({ "username": "olga", "role": "viewer", "password": PASSWORD }))
        .await;
    assert_eq!(created.status(), 201);
    let olga = Client::anonymous(&server.address);
    let signed_in: Value = olga.login("olga", PASSWORD).await.json().await.unwrap();
    assert_eq!(signed_in["user"]["must_change_password"], false);
    assert_eq!(olga.get("/v1/tools").await.status(), 200);
}
