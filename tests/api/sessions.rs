//! A session ends when it lies idle longer than the idle timeout, like any bad session; one in
//! use lives on. The timeout is shortened to seconds here; the server's default is 30 minutes.

use app::domain::Role;
use std::time::Duration;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    a_session_left_idle_longer_than_the_timeout_is_over,
    a_session_in_use_outlives_its_idle_timeout,
);

async fn app_with_idle_timeout(db: Db, idle: Duration) -> TestApp {
    TestApp::spawn_with(db, |config| config.session_idle = idle).await
}

async fn a_session_left_idle_longer_than_the_timeout_is_over(db: Db) {
    let app = app_with_idle_timeout(db, Duration::from_secs(1)).await;
    let person = app.person(Role::Approver).await;
    assert_eq!(person.me().await.status(), 200);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_error(person.me().await, 401, "unauthorized").await;
    let page = person.get_page("/").await;
    assert!(
        page.status().is_redirection(),
        "the overview sends the idle person to sign in: {}",
        page.status()
    );
    assert_eq!(page.headers()["location"], "/login");
    assert_error(person.get("/v1/operations").await, 401, "unauthorized").await;
}

async fn a_session_in_use_outlives_its_idle_timeout(db: Db) {
    let idle = Duration::from_secs(2);
    let app = app_with_idle_timeout(db, idle).await;
    let person = app.person(Role::Viewer).await;
    // Used every half second for three seconds: longer than the timeout in all, but never
    // idle for long (its last use is recorded at most a quarter of the timeout late).
    for _ in 0..6 {
        tokio::time::sleep(idle / 4).await;
        assert_eq!(person.me().await.status(), 200);
    }
}
