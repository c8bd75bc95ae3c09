//! The audit of people: every sign-in (failed ones with the name tried), approval, rejection,
//! API key, user, password and tool change is recorded with who, when and from where, shown
//! newest first to admins only, and never holds a password or a key.

use app::domain::Role;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::cli::idem;
use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    people_actions_are_recorded_with_who_when_and_where,
    sign_ins_from_the_page_and_throttled_ones_are_recorded_too,
    the_log_pages_newest_first_for_admins_only,
    the_command_line_is_recorded_as_cli_without_an_address,
);

/// Every event of the log, newest first, as an admin reads it.
async fn all_events(admin: &Client) -> Vec<Value> {
    let response = admin.audit("?limit=200").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["next_cursor"].is_null());
    body["events"].as_array().unwrap().clone()
}

fn field<'a>(event: &'a Value, name: &str) -> &'a str {
    event[name].as_str().unwrap_or_default()
}

fn id_of(created: &Value) -> String {
    created["operation"]["id"].as_str().unwrap().to_owned()
}

async fn people_actions_are_recorded_with_who_when_and_where(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("ada", Role::Admin, "ada's long password")
        .await;
    let stranger = app.anonymous();
    assert_eq!(
        stranger.login("ada", "not her password").await.status(),
        401
    );
    let typo = stranger.login("nobody", "some long password").await;
    assert_eq!(typo.status(), 401);
    let admin = app.anonymous();
    assert_eq!(
        admin.login("ada", "ada's long password").await.status(),
        200
    );

    let created = admin
        .create_key(&json!({ "namespace": "billing", "name": "harness" }))
        .await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let (key_id, secret) = (
        created["api_key"]["id"].as_str().unwrap(),
        created["key"].as_str().unwrap(),
    );
    assert_eq!(admin.revoke_key(key_id).await.status(), 204);
    let olga =
        json!({ "username": "olga", "role": "approver", "password": "olga's long password" });
    assert_eq!(admin.create_user(&olga).await.status(), 201);
    let policy = json!({ "effect": "irreversible" });
    assert_eq!(admin.put_tool("wire", &policy).await.status(), 200);
    let agent = app.agent("treasury").await;
    let mut waiting = Vec::new();
    for key in ["w-1", "w-2"] {
        let claim = json!({ "tool": "wire", "key": key, "args": { "amount": 10 } });
        let response = agent.claim(&claim).await;
        assert_eq!(response.status(), 202);
        waiting.push(id_of(&response.json().await.unwrap()));
    }
    let approve = json!({ "reason": "expected payout" });
    assert_eq!(admin.approve(&waiting[0], &approve).await.status(), 200);
    let reject = json!({ "reason": "too much" });
    assert_eq!(admin.reject(&waiting[1], &reject).await.status(), 200);

    let events = all_events(&admin).await;
    let expected = [
        (
            "operation.rejected",
            "user:ada",
            format!("operation:{}", waiting[1]),
        ),
        (
            "operation.approved",
            "user:ada",
            format!("operation:{}", waiting[0]),
        ),
        ("tool.registered", "user:ada", "tool:wire".into()),
        ("user.created", "user:ada", "user:olga".into()),
        ("api_key.revoked", "user:ada", format!("api_key:{key_id}")),
        ("api_key.created", "user:ada", format!("api_key:{key_id}")),
        ("login.succeeded", "user:ada", "user:ada".into()),
        ("login.failed", "anonymous", "user:nobody".into()),
        ("login.failed", "anonymous", "user:ada".into()),
        ("user.created", "system", "user:admin".into()),
    ];
    let actual: Vec<(&str, &str, String)> = events
        .iter()
        .map(|e| {
            (
                field(e, "action"),
                field(e, "actor"),
                field(e, "subject").to_owned(),
            )
        })
        .collect();
    let expected: Vec<(&str, &str, String)> = expected.into_iter().collect();
    assert_eq!(actual, expected);

    let times: Vec<DateTime<Utc>> = events
        .iter()
        .map(|e| field(e, "at").parse().expect("an RFC 3339 time"))
        .collect();
    assert!(times.windows(2).all(|pair| pair[0] >= pair[1]), "{times:?}");
    for event in &events[..events.len() - 1] {
        assert_eq!(event["address"], "127.0.0.1", "{event}");
    }
    assert!(
        events.last().unwrap()["address"].is_null(),
        "the bootstrap has no address"
    );

    assert_eq!(events[0]["detail"]["reason"], "too much");
    assert_eq!(events[1]["detail"]["reason"], "expected payout");
    assert_eq!(events[1]["detail"]["namespace"], "treasury");
    assert_eq!(events[2]["detail"]["policy"]["effect"], "irreversible");
    assert_eq!(events[3]["detail"]["role"], "approver");
    assert_eq!(events[5]["detail"]["namespace"], "billing");
    assert_eq!(events[7]["detail"]["username"], "nobody");
    assert_eq!(events[8]["detail"]["reason"], "invalid_credentials");

    let text = serde_json::to_string(&events).unwrap();
    for secret in [
        "not her password",
        "some long password",
        "ada's long password",
        "olga's long password",
        secret,
    ] {
        assert!(!text.contains(secret), "the audit log holds {secret:?}");
    }
}

async fn sign_ins_from_the_page_and_throttled_ones_are_recorded_too(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    let page = app.anonymous();
    let form = [("username", "vera"), ("password", "a wrong password")];
    let refused = page
        .http
        .post(page.url("/api/login"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(!refused.status().is_success(), "{}", refused.status());

    // The page's failure counts too: four more and the name and address are locked.
    let stranger = app.anonymous();
    for _ in 0..4 {
        assert_eq!(stranger.login("vera", "guess").await.status(), 401);
    }
    assert_eq!(stranger.login("vera", "guess").await.status(), 429);

    let events = all_events(&admin).await;
    let failures: Vec<&str> = events
        .iter()
        .filter(|e| field(e, "action") == "login.failed")
        .map(|e| e["detail"]["reason"].as_str().unwrap())
        .collect();
    let mut expected = vec!["throttled"];
    expected.extend(["invalid_credentials"; 5]);
    assert_eq!(
        failures, expected,
        "one from the page, four from the API, then 429"
    );
    assert!(events
        .iter()
        .filter(|e| field(e, "action") == "login.failed")
        .all(|e| field(e, "subject") == "user:vera" && field(e, "address") == "127.0.0.1"));
}

async fn the_log_pages_newest_first_for_admins_only(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    for n in 0..5 {
        let policy = json!({ "effect": "read_only" });
        assert_eq!(
            admin.put_tool(&format!("tool-{n}"), &policy).await.status(),
            200
        );
    }
    let everything = all_events(&admin).await;
    assert_eq!(everything.len(), 7, "bootstrap, sign-in, five tools");

    let mut paged = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let page: Value = admin.audit(&query).await.json().await.unwrap();
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 2);
        paged.extend(events.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(
        paged, everything,
        "the pages add up to the whole log, in order"
    );

    assert_error(admin.audit("?cursor=nope").await, 400, "invalid_cursor").await;
    assert_error(admin.audit("?limit=0").await, 400, "invalid_limit").await;
    assert_error(admin.audit("?limit=201").await, 400, "invalid_limit").await;
    for role in [Role::Viewer, Role::Operator, Role::Approver] {
        let person = app.person(role).await;
        assert_error(person.audit("").await, 403, "forbidden").await;
    }
    let agent = app.agent("billing").await;
    assert_error(agent.audit("").await, 403, "forbidden").await;
    assert_error(app.anonymous().audit("").await, 401, "unauthorized").await;
}

async fn the_command_line_is_recorded_as_cli_without_an_address(db: Db) {
    let app = TestApp::spawn(db).await;
    let url = app.database.url();
    let changed = idem(
        &[
            "users",
            "set-password",
            "--username",
            "admin",
            "--password-stdin",
        ],
        url,
        Some("the new admin password\n"),
    );
    assert!(changed.status.success(), "{changed:?}");
    let created = idem(&["keys", "create", "--namespace", "ops"], url, None);
    assert!(created.status.success(), "{created:?}");

    let (events, more) = app.state.audit.page(None, 50).await.unwrap();
    assert!(!more);
    let by_cli: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e.actor == "cli")
        .map(|e| (e.action.as_str(), e.subject.as_str()))
        .collect();
    assert_eq!(by_cli[0].0, "api_key.created");
    assert_eq!(by_cli[1], ("user.password_changed", "user:admin"));
    assert!(events
        .iter()
        .filter(|e| e.actor == "cli")
        .all(|e| e.address.is_none()));
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains("the new admin password"));
    let key = String::from_utf8(created.stdout).unwrap();
    assert!(!text.contains(key.trim()));
}
