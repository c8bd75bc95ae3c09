//! The server-rendered pages, as a client without JavaScript sees them. Hydration and clicks
//! are covered by the Playwright tests in end2end/.

use app::domain::Role;

use crate::helpers::{Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    the_login_page_is_server_rendered_with_its_form_and_scripts,
    the_overview_sends_strangers_to_the_login_page,
    the_overview_names_the_person_signed_in,
    the_login_form_works_without_javascript,
    unknown_pages_are_404,
);

async fn the_login_page_is_server_rendered_with_its_form_and_scripts(db: Db) {
    let app = TestApp::spawn(db).await;
    let response = app.anonymous().get("/login").await;
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    for needle in [
        "<form",
        "name=\"username\"",
        "name=\"password\"",
        "Sign in",
        "/pkg/idem.js",
        "/pkg/idem.css",
    ] {
        assert!(html.contains(needle), "the login page lacks {needle}");
    }
}

async fn the_overview_sends_strangers_to_the_login_page(db: Db) {
    let app = TestApp::spawn(db).await;
    let client = app.anonymous();
    let response = client.get_page("/").await;
    assert!(response.status().is_redirection(), "{}", response.status());
    assert_eq!(response.headers()["location"], "/login");
}

async fn the_overview_names_the_person_signed_in(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    let client = app.anonymous();
    assert_eq!(
        client.login("vera", "vera's long password").await.status(),
        200
    );
    let response = client.get("/").await;
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(
        html.contains("vera") && html.contains("viewer") && html.contains("Sign out"),
        "{html}"
    );
}

async fn the_login_form_works_without_javascript(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    let client = app.anonymous();
    let form = [("username", "vera"), ("password", "vera's long password")];
    let response = client
        .http
        .post(client.url("/api/login"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success() || response.status().is_redirection(),
        "{}",
        response.status()
    );
    assert!(response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .starts_with("idem_session="));
    assert_eq!(client.me().await.status(), 200);
}

async fn unknown_pages_are_404(db: Db) {
    let app = TestApp::spawn(db).await;
    let response = app.anonymous().get("/no/such/page").await;
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("Page not found"));
}
