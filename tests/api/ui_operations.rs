//! The operations pages as a client without JavaScript sees them: the filter comes from the
//! query string, a bad filter or an unknown operation answers with the right status, and the
//! detail page is whole every time (its data is read during server rendering).

use app::domain::Role;
use serde_json::{json, Value};

use chrono::{TimeDelta, Utc};

use crate::helpers::{Client, Db, TestApp};
use crate::metrics::execute_on;
use crate::on_both_databases;
use crate::operation_filters::unknown_for_minutes;

on_both_databases!(
    the_operations_table_is_filtered_by_the_query_string,
    a_bad_filter_answers_400_with_the_server_message,
    the_table_filters_by_time_range_and_stuck_and_links_its_export,
    the_operation_page_renders_whole_every_time_and_an_unknown_one_is_404,
    the_unknowns_page_says_when_more_wait_than_it_shows,
);

/// Claims an operation with `key` and returns the claim's answer.
async fn claimed(agent: &Client, key: &str) -> Value {
    let response = agent
        .post_json(
            "/v1/operations",
            &json!({"tool": "refund", "key": key, "args": {"order": key}}),
        )
        .await;
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

/// Claims an operation with `key` and returns its id.
async fn claim(agent: &Client, key: &str) -> String {
    claimed(agent, key).await["operation"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn page(client: &Client, path: &str) -> (u16, String) {
    let response = client.get_page(path).await;
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn the_operations_table_is_filtered_by_the_query_string(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("shop").await;
    claim(&agent, "order-1").await;
    claim(&agent, "order-2").await;
    let viewer = app.person(Role::Viewer).await;

    let (status, html) = page(&viewer, "/operations?namespace=shop&key=order-2").await;
    assert_eq!(status, 200);
    assert!(html.contains("order-2"), "{html}");
    assert!(!html.contains("order-1"), "the filter let order-1 through");
    assert!(
        html.contains(r#"name="namespace" value="shop""#),
        "the form lost the filter"
    );

    let (_, html) = page(&viewer, "/operations?namespace=elsewhere").await;
    assert!(html.contains("No operations match this filter"), "{html}");
}

async fn a_bad_filter_answers_400_with_the_server_message(db: Db) {
    let app = TestApp::spawn(db).await;
    let viewer = app.person(Role::Viewer).await;
    let (status, html) = page(&viewer, "/operations?status=bogus").await;
    assert_eq!(status, 400);
    assert!(html.contains("status must be one of"), "{html}");
}

async fn the_table_filters_by_time_range_and_stuck_and_links_its_export(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("shop").await;
    unknown_for_minutes(&app, db, &agent, "stuck-one", 20).await;
    let old = claim(&agent, "created-long-ago").await;
    let long_ago = Utc::now() - TimeDelta::days(2);
    let sql = "update operations set created_at = $1 where id = $2";
    assert_eq!(
        execute_on(app.database.url(), db, sql, long_ago, &old).await,
        1
    );
    claim(&agent, "fresh-one").await;
    let viewer = app.person(Role::Viewer).await;

    let (status, html) = page(&viewer, "/operations?stuck=true").await;
    assert_eq!(status, 200);
    assert!(html.contains("refund:stuck-one"), "{html}");
    assert!(!html.contains("fresh-one") && !html.contains("created-long-ago"));
    assert!(
        html.contains(r#"name="stuck""#) && html.contains("checked"),
        "{html}"
    );

    // A `datetime-local` value, read as UTC, and shown back in the form.
    let day_ago = (Utc::now() - TimeDelta::days(1)).format("%Y-%m-%dT%H:%M:%S");
    let (_, html) = page(&viewer, &format!("/operations?since={day_ago}")).await;
    assert!(
        html.contains("fresh-one") && html.contains("stuck-one"),
        "{html}"
    );
    assert!(!html.contains("created-long-ago"), "{html}");
    assert!(
        html.contains(&format!(
            r#"name="since" type="datetime-local" step="1" value="{day_ago}""#
        )),
        "{html}"
    );
    let (_, html) = page(&viewer, &format!("/operations?until={day_ago}")).await;
    assert!(html.contains("created-long-ago") && !html.contains("fresh-one"));
    let export = format!("/v1/operations/export?since={day_ago}Z").replace(':', "%3A");
    assert!(html.contains("Export CSV"), "{html}");
    let (_, html) = page(&viewer, &format!("/operations?since={day_ago}")).await;
    assert!(
        html.contains(&export),
        "the export link keeps the filter: {html}"
    );

    let (status, html) = page(&viewer, "/operations?until=tomorrow").await;
    assert_eq!(status, 400);
    assert!(html.contains("is not a date and time"), "{html}");
}

async fn the_operation_page_renders_whole_every_time_and_an_unknown_one_is_404(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("shop").await;
    let id = claim(&agent, "order-7").await;
    let viewer = app.person(Role::Viewer).await;

    // The page's data is read while the server renders it; a read that lost its context
    // after the first await answered "something went wrong" now and then.
    for _ in 0..10 {
        let (status, html) = page(&viewer, &format!("/operations/{id}")).await;
        assert_eq!(status, 200, "{html}");
        assert!(
            html.contains("order-7") && html.contains("Timeline"),
            "{html}"
        );
        assert!(!html.contains("something went wrong"), "{html}");
    }
    let (_, html) = page(&viewer, &format!("/operations/{id}")).await;
    assert!(
        html.contains("Provider key") && html.contains(&format!("idem_{id}")),
        "the page shows what the provider is sent: {html}"
    );

    let (status, html) = page(&viewer, &format!("/operations/{}", uuid::Uuid::nil())).await;
    assert_eq!(status, 404);
    assert!(html.contains("No such operation"), "{html}");
}

/// Claims an operation with `key` and reports its outcome unknown, as an agent whose call
/// timed out does.
async fn unknown(agent: &Client, key: &str) {
    let body = claimed(agent, key).await;
    let id = body["operation"]["id"].as_str().unwrap();
    let token = body["lease"]["token"].as_str().unwrap();
    let marked = agent
        .mark_unknown(id, &json!({ "lease_token": token }))
        .await;
    assert_eq!(marked.status(), 200);
}

async fn the_unknowns_page_says_when_more_wait_than_it_shows(db: Db) {
    let app = TestApp::spawn(db).await;
    let agent = app.agent("shop").await;
    let operator = app.person(Role::Operator).await;
    const MORE_WAIT: &str = "more are waiting";

    unknown(&agent, "lost-0").await;
    let (status, html) = page(&operator, "/unknowns").await;
    assert_eq!(status, 200);
    assert!(html.contains("lost-0"), "{html}");
    assert!(
        !html.contains(MORE_WAIT),
        "one unknown fits the page: {html}"
    );

    // The page shows the 50 oldest; the 51st is left to the operations list.
    for n in 1..=50 {
        unknown(&agent, &format!("lost-{n}")).await;
    }
    let (_, html) = page(&operator, "/unknowns").await;
    assert!(html.contains("lost-0"), "the oldest is shown: {html}");
    assert!(!html.contains("lost-50<"), "the newest is past the page");
    assert!(html.contains(MORE_WAIT), "{html}");
    assert!(
        html.contains(r#"href="/operations?status=unknown""#),
        "{html}"
    );
}
