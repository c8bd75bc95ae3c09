//! The admin page's server functions go through the same actions as `/v1/keys`, `/v1/users`
//! and `/v1/tools`: they refuse everyone but admins, and leave the same audit trail.

use app::domain::Role;
use serde_json::Value;

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    the_admin_server_functions_refuse_everyone_but_admins,
    keys_and_people_made_on_the_admin_page_work_and_are_audited_like_rest,
);

/// A server function called as a form posts it.
pub(crate) async fn call(client: &Client, endpoint: &str, form: &str) -> reqwest::Response {
    let path = format!("/api/{endpoint}");
    let content_type = Some("application/x-www-form-urlencoded");
    client.post_raw(&path, form.to_owned(), content_type).await
}

async fn the_admin_server_functions_refuse_everyone_but_admins(db: Db) {
    let app = TestApp::spawn(db).await;
    for role in [Role::Viewer, Role::Operator, Role::Approver] {
        let person = app.person(role).await;
        for (endpoint, form) in [
            ("create_api_key", "namespace=stolen"),
            (
                "create_user",
                "username=mallory&role=admin&password=a+long+enough+password",
            ),
            ("users", ""),
            ("api_keys", ""),
            ("revoke_api_key", "id=01a232dc-4cb7-7494-9df1-8fa908e148b3"),
            ("register_tool", "form[name]=t&form[effect]=read_only"),
            (
                "update_user",
                "id=01a232dc-4cb7-7494-9df1-8fa908e148b3&disabled=true",
            ),
            ("delete_user", "id=01a232dc-4cb7-7494-9df1-8fa908e148b3"),
        ] {
            let response = call(&person, endpoint, form).await;
            assert_eq!(response.status(), 403, "{role:?} on {endpoint}");
        }
    }
    let stranger = call(&app.anonymous(), "api_keys", "").await;
    assert_eq!(stranger.status(), 401);
    let keys: Value = app
        .person(Role::Admin)
        .await
        .list_keys()
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        keys["api_keys"],
        serde_json::json!([]),
        "nothing was created"
    );
}

async fn keys_and_people_made_on_the_admin_page_work_and_are_audited_like_rest(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Admin, "ada's long password")
        .await;
    let admin = app.anonymous();
    assert_eq!(
        admin.login("ada", "ada's long password").await.status(),
        200
    );

    let created = call(&admin, "create_api_key", "namespace=billing&name=page").await;
    assert_eq!(created.status(), 200);
    let created: Value = created.json().await.unwrap();
    let key = created["key"].as_str().unwrap();
    let key_id = created["api_key"]["id"].as_str().unwrap();
    let agent = app.agent_with_key(key);
    assert_eq!(agent.get("/v1/operations").await.status(), 200);
    let revoked = call(&admin, "revoke_api_key", &format!("id={key_id}")).await;
    assert_eq!(revoked.status(), 200);
    assert_eq!(agent.get("/v1/operations").await.status(), 401);

    let form = "username=olga&role=approver&password=olga%27s+long+password";
    assert_eq!(call(&admin, "create_user", form).await.status(), 200);
    let taken = call(&admin, "create_user", form).await;
    assert_eq!(taken.status(), 409);
    let events: Value = admin.audit("?limit=10").await.json().await.unwrap();
    let trail: Vec<(String, String, String)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .take(3)
        .map(|e| {
            let text = |name: &str| e[name].as_str().unwrap_or_default().to_owned();
            (text("action"), text("actor"), text("subject"))
        })
        .collect();
    let expected = [
        ("user.created", "user:ada", "user:olga".to_owned()),
        ("api_key.revoked", "user:ada", format!("api_key:{key_id}")),
        ("api_key.created", "user:ada", format!("api_key:{key_id}")),
    ]
    .map(|(action, actor, subject)| (action.to_owned(), actor.to_owned(), subject));
    assert_eq!(trail, expected);
    assert!(
        !events.to_string().contains(key),
        "the audit log holds the key"
    );
    assert_eq!(
        app.anonymous()
            .login("olga", "olga's long password")
            .await
            .status(),
        200
    );
}
