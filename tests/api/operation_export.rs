//! `GET /v1/operations/export`: the list's filters, every matching row, as CSV.

use app::domain::Role;
use serde_json::Value;

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::metrics::refund;
use crate::on_both_databases;
use crate::operation_filters::unknown_for_minutes;

on_both_databases!(
    the_export_holds_the_rows_the_filter_keeps,
    the_export_holds_every_row_past_one_page,
    bad_filters_are_400_in_the_error_shape,
);

/// The export's header and rows, after checking that it is a CSV download.
async fn export(client: &Client, query: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let response = client.get(&format!("/v1/operations/export{query}")).await;
    assert_eq!(response.status(), 200, "{query}");
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("content-type"), "text/csv; charset=utf-8");
    assert!(header("content-disposition").starts_with("attachment"));
    let text = response.text().await.unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let names = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    let rows = reader
        .records()
        .map(|row| row.unwrap().iter().map(str::to_owned).collect())
        .collect();
    (names, rows)
}

fn column(names: &[String], rows: &[Vec<String>], name: &str) -> Vec<String> {
    let at = names.iter().position(|n| n == name).unwrap();
    rows.iter().map(|row| row[at].clone()).collect()
}

async fn the_export_holds_the_rows_the_filter_keeps(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    let stuck = unknown_for_minutes(&app, db, &shop, "stuck, \"quoted\"", 20).await;
    shop.start(&refund("running", 100)).await;
    let other = app.agent("billing").await;
    other.start(&refund("elsewhere", 100)).await;
    let viewer = app.person(Role::Viewer).await;

    let (names, rows) = export(&viewer, "").await;
    assert_eq!(
        names[..6],
        ["id", "namespace", "tool", "effect", "key", "status"]
    );
    assert_eq!(
        column(&names, &rows, "key"),
        [
            "refund:elsewhere",
            "refund:running",
            "refund:stuck, \"quoted\""
        ],
        "every operation, newest first; commas and quotes survive"
    );
    let (_, stuck_rows) = export(&viewer, "?stuck=true").await;
    assert_eq!(column(&names, &stuck_rows, "id"), [stuck]);
    assert_eq!(column(&names, &stuck_rows, "status"), ["unknown"]);
    let (_, by_key) = export(&viewer, "?key_contains=run&namespace=shop").await;
    assert_eq!(column(&names, &by_key, "key"), ["refund:running"]);

    let (_, own) = export(&shop, "").await;
    assert_eq!(column(&names, &own, "namespace"), ["shop", "shop"]);
    let (header, none) = export(&shop, "?namespace=billing").await;
    assert_eq!(header, names, "an empty export still has its header row");
    assert!(none.is_empty());

    let listed: Value = viewer
        .get("/v1/operations?key_contains=run")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["operations"][0]["key"], "refund:running");
    assert_eq!(listed["operations"].as_array().unwrap().len(), 1);
}

async fn the_export_holds_every_row_past_one_page(db: Db) {
    let app = TestApp::spawn(db).await;
    let shop = app.agent("shop").await;
    // More than the 500 rows the export reads at a time.
    for n in 0..520 {
        shop.start(&refund(&format!("bulk-{n}"), 100)).await;
    }
    let viewer = app.person(Role::Viewer).await;

    let (names, rows) = export(&viewer, "?tool=refund").await;
    let mut keys = column(&names, &rows, "key");
    assert_eq!(keys.len(), 520);
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 520, "no row twice");
}

async fn bad_filters_are_400_in_the_error_shape(db: Db) {
    let app = TestApp::spawn(db).await;
    let viewer = app.person(Role::Viewer).await;
    for (query, code) in [
        ("?since=yesterday", "invalid_time"),
        ("?stuck=yes", "invalid_stuck"),
        ("?status=lost", "invalid_status"),
    ] {
        let response = viewer.get(&format!("/v1/operations/export{query}")).await;
        assert_error(response, 400, code).await;
    }
    let response = app.anonymous().get("/v1/operations/export").await;
    assert_eq!(response.status(), 401);
}
