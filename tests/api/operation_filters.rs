//! The operations list filtered by time range (`since`, `until` on `created_at`) and by
//! `stuck`, on both databases.

use app::domain::Role;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::metrics::{execute_on, last_updated_minutes_ago, refund};
use crate::on_both_databases;

on_both_databases!(
    the_list_keeps_the_operations_created_in_the_time_range,
    the_stuck_filter_keeps_the_unknowns_older_than_the_threshold,
    bad_time_or_stuck_values_are_400_and_change_nothing,
);

/// Claims a refund of `order`, reports its outcome unknown, and moves that `minutes` back;
/// returns the operation's id.
pub(crate) async fn unknown_for_minutes(
    app: &TestApp,
    db: Db,
    agent: &Client,
    order: &str,
    minutes: i64,
) -> String {
    let (id, token, _) = agent.start(&refund(order, 100)).await;
    let marked = agent
        .mark_unknown(&id, &json!({ "lease_token": token }))
        .await;
    assert_eq!(marked.status(), 200);
    last_updated_minutes_ago(app.database.url(), db, &id, minutes).await;
    id
}

/// The keys of a listing, newest first.
async fn keys(client: &Client, query: &str) -> Vec<String> {
    let response = client.get(&format!("/v1/operations{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    let body: Value = response.json().await.unwrap();
    body["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["key"].as_str().unwrap().to_owned())
        .collect()
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

async fn the_list_keeps_the_operations_created_in_the_time_range(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let (old, _, _) = shop.start(&refund("old", 100)).await;
    shop.start(&refund("new", 100)).await;
    let two_hours_ago = Utc::now() - TimeDelta::hours(2);
    let sql = "update operations set created_at = $1 where id = $2";
    assert_eq!(
        execute_on(app.database.url(), db, sql, two_hours_ago, &old).await,
        1
    );
    let hour_ago = rfc3339(Utc::now() - TimeDelta::hours(1));
    let viewer = app.person(Role::Viewer).await;

    assert_eq!(
        keys(&viewer, &format!("?since={hour_ago}")).await,
        ["refund:new"]
    );
    assert_eq!(
        keys(&viewer, &format!("?until={hour_ago}")).await,
        ["refund:old"]
    );
    let exact = rfc3339(two_hours_ago - TimeDelta::seconds(1));
    assert_eq!(
        keys(
            &viewer,
            &format!("?since={exact}&until={hour_ago}&tool=refund")
        )
        .await,
        ["refund:old"],
        "since is inclusive and combines with the other filters"
    );
    assert_eq!(
        keys(&shop, &format!("?since={hour_ago}")).await,
        ["refund:new"]
    );
    let other = app.agent("billing").await;
    assert!(keys(&other, &format!("?since={hour_ago}")).await.is_empty());
}

async fn the_stuck_filter_keeps_the_unknowns_older_than_the_threshold(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    unknown_for_minutes(&app, db, &shop, "stuck", 20).await;
    unknown_for_minutes(&app, db, &shop, "fresh", 5).await;
    // Unknown before `unknown_since` was recorded: it counts from its last change.
    let legacy = unknown_for_minutes(&app, db, &shop, "legacy", 0).await;
    let sql = "update operations set updated_at = $1, unknown_since = null where id = $2";
    let long_ago = Utc::now() - TimeDelta::minutes(30);
    assert_eq!(
        execute_on(app.database.url(), db, sql, long_ago, &legacy).await,
        1
    );
    shop.start(&refund("running", 100)).await;
    let viewer = app.person(Role::Viewer).await;

    let stuck = ["refund:legacy", "refund:stuck"];
    assert_eq!(
        keys(&viewer, "?stuck=true").await,
        stuck,
        "unknown for 20 and 30 minutes, past the default 15"
    );
    let gauge = viewer.metrics_body("").await["stuck_unknown"].clone();
    assert_eq!(gauge, json!(stuck.len()), "the list and the gauge agree");
    assert_eq!(keys(&viewer, "?stuck=false").await.len(), 4);
    assert_eq!(keys(&shop, "?stuck=true&namespace=shop").await, stuck);
    let other = app.agent("billing").await;
    assert!(keys(&other, "?stuck=true").await.is_empty());
}

async fn bad_time_or_stuck_values_are_400_and_change_nothing(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    shop.start(&refund("1", 100)).await;
    let viewer = app.person(Role::Viewer).await;
    let before: Value = viewer.get("/v1/operations").await.json().await.unwrap();
    for (query, code) in [
        ("?since=yesterday", "invalid_time"),
        ("?until=2026-13-01T00:00:00Z", "invalid_time"),
        ("?since=2026-12-01", "invalid_time"),
        ("?stuck=maybe", "invalid_stuck"),
        ("?stuck=1", "invalid_stuck"),
    ] {
        let response = viewer.get(&format!("/v1/operations{query}")).await;
        assert_error(response, 400, code).await;
    }
    let after: Value = viewer.get("/v1/operations").await.json().await.unwrap();
    assert_eq!(before, after);
}

#[tokio::test]
async fn the_openapi_document_lists_the_time_range_and_stuck_parameters() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let response = app.anonymous().get("/v1/openapi.json").await;
    let document: Value = response.json().await.unwrap();
    let parameters = document["paths"]["/v1/operations"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let schema_of = |name: &str| {
        parameters
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["schema"].clone())
            .unwrap_or_else(|| panic!("no parameter {name}"))
    };
    assert_eq!(schema_of("since")["format"], "date-time");
    assert_eq!(schema_of("until")["format"], "date-time");
    assert!(schema_of("stuck")["type"].to_string().contains("boolean"));
}
