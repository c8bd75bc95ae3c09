//! `GET /v1/metrics/tools`: the trouble by namespace and tool, counted from the same ledger
//! as `GET /v1/metrics`, on both databases.

use app::domain::Role;
use serde_json::{json, Value};

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::metrics::{append_reconciliations, drive_mix, last_updated_minutes_ago, refund};
use crate::on_both_databases;

on_both_databases!(
    the_rows_count_a_known_mix_by_namespace_and_tool,
    an_agent_sees_its_own_namespace_only,
);

async fn tools(client: &Client, query: &str) -> Value {
    let response = client.get(&format!("/v1/metrics/tools{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    response.json().await.unwrap()
}

/// The row of `namespace` and `tool`.
fn row<'a>(report: &'a Value, namespace: &str, tool: &str) -> &'a Value {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["namespace"] == namespace && row["tool"] == tool)
        .unwrap_or_else(|| panic!("no row for {namespace}/{tool} in {report}"))
}

async fn fail(agent: &Client, order: &str) {
    let (id, token, _) = agent.start(&refund(order, 100)).await;
    let error = json!({ "code": "card_declined", "message": "declined" });
    let body = json!({ "lease_token": token, "outcome": "failed", "error": error });
    assert_eq!(agent.complete(&id, &body).await.status(), 200);
}

async fn the_rows_count_a_known_mix_by_namespace_and_tool(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let other = app.agent("other").await;
    let mix = drive_mix(&app, &shop, &other).await;
    append_reconciliations(&app, &mix).await;
    last_updated_minutes_ago(app.database.url(), db, &mix.unknown_old, 20).await;
    fail(&shop, "6").await;
    let viewer = app.person(Role::Viewer).await;

    let report = tools(&viewer, "?window=24h").await;
    assert_eq!(report["window"], "24h");
    assert_eq!(report["stuck_after_seconds"], 900);
    let pairs: Vec<(&str, &str)> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["namespace"].as_str().unwrap(),
                r["tool"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [("other", "refund"), ("shop", "refund"), ("shop", "wire")]
    );
    assert_eq!(
        row(&report, "shop", "refund"),
        &json!({
            "namespace": "shop", "tool": "refund",
            "operations": 6, "duplicates_prevented": 4, "failures": 1,
            "unknown_now": 2, "stuck_unknown": 1, "awaiting_approval": 0,
            "reconciliation_p95_ms": 1200
        })
    );
    assert_eq!(
        row(&report, "shop", "wire"),
        &json!({
            "namespace": "shop", "tool": "wire",
            "operations": 1, "duplicates_prevented": 1, "failures": 0,
            "unknown_now": 0, "stuck_unknown": 0, "awaiting_approval": 1,
            "reconciliation_p95_ms": null
        })
    );
    assert_eq!(row(&report, "other", "refund")["duplicates_prevented"], 1);

    // The rows add up to the overall numbers.
    let overall = viewer.metrics_body("?window=24h").await;
    for field in [
        "duplicates_prevented",
        "unknown_now",
        "stuck_unknown",
        "awaiting_approval",
    ] {
        let sum: u64 = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[field].as_u64().unwrap())
            .sum();
        assert_eq!(json!(sum), overall[field], "{field}");
    }

    // The overview's table, as a browser without JavaScript gets it.
    let html = viewer.get_page("/?window=24h").await.text().await.unwrap();
    assert!(html.contains("By tool"), "{html}");
    assert!(
        html.contains(r#"data-namespace="shop" data-tool="refund""#),
        "{html}"
    );
    assert!(
        html.contains("/operations?tool=refund&amp;namespace=shop&amp;stuck=true"),
        "the stuck count links to the stuck ones: {html}"
    );

    let shop_only = tools(&viewer, "?namespace=shop").await;
    assert_eq!(shop_only["tools"].as_array().unwrap().len(), 2);
    assert_error(
        viewer.get("/v1/metrics/tools?window=1y").await,
        400,
        "invalid_window",
    )
    .await;
    assert_error(
        viewer.get("/v1/metrics/tools?namespace=no%20spaces").await,
        400,
        "invalid_namespace",
    )
    .await;
}

async fn an_agent_sees_its_own_namespace_only(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let other = app.agent("other").await;
    shop.start(&refund("1", 100)).await;
    other.start(&refund("1", 100)).await;

    let own = tools(&shop, "").await;
    assert_eq!(own["tools"].as_array().unwrap().len(), 1);
    assert_eq!(row(&own, "shop", "refund")["operations"], 1);
    let elsewhere = tools(&shop, "?namespace=other").await;
    assert_eq!(elsewhere["tools"], json!([]));
    assert_eq!(app.anonymous().get("/v1/metrics/tools").await.status(), 401);
}
