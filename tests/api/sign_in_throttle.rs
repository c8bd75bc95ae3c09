//! Sign-in throttling that an attacker cannot race or turn against others: an attempt is
//! counted before its password is hashed, a (name, address) pair has a small budget and an
//! address a larger one, and refused attempts are audited as counts.

use app::domain::Role;
use serde_json::Value;
use tokio::task::JoinSet;

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    concurrent_guesses_at_one_account_get_no_more_than_the_budget,
    one_persons_lockout_leaves_the_others_behind_the_same_address_alone,
    refused_attempts_are_audited_as_counts_not_one_row_each,
);

/// Statuses of `guesses` wrong-password sign-ins as `username`, sent all at once.
async fn guess_at_once(app: &TestApp, username: &str, guesses: usize) -> Vec<u16> {
    let mut attempts = JoinSet::new();
    for n in 0..guesses {
        let client = app.anonymous();
        let username = username.to_owned();
        attempts.spawn(async move {
            let answer = client.login(&username, &format!("guess {n}")).await;
            if answer.status() == 429 {
                assert!(answer.headers().contains_key("retry-after"));
            }
            answer.status().as_u16()
        });
    }
    attempts.join_all().await
}

async fn concurrent_guesses_at_one_account_get_no_more_than_the_budget(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    let statuses = guess_at_once(&app, "vera", 40).await;
    let checked = statuses.iter().filter(|status| **status == 401).count();
    let refused = statuses.iter().filter(|status| **status == 429).count();
    assert_eq!((checked, refused), (5, 35), "{statuses:?}");
    let right = app.anonymous().login("vera", "vera's long password").await;
    assert_eq!(right.status(), 429, "the pair stays locked for its window");
}

async fn one_persons_lockout_leaves_the_others_behind_the_same_address_alone(db: Db) {
    let app = TestApp::spawn(db).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    app.create_person("walt", Role::Viewer, "walt's long password")
        .await;
    let statuses = guess_at_once(&app, "vera", 8).await;
    assert!(statuses.contains(&429), "vera is locked: {statuses:?}");
    let colleague = app.anonymous().login("walt", "walt's long password").await;
    assert_eq!(colleague.status(), 200, "same address, another person");
}

async fn refused_attempts_are_audited_as_counts_not_one_row_each(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    app.create_person("vera", Role::Viewer, "vera's long password")
        .await;
    let stranger = app.anonymous();
    for _ in 0..5 {
        assert_eq!(stranger.login("vera", "guess").await.status(), 401);
    }
    for _ in 0..12 {
        assert_eq!(stranger.login("vera", "guess").await.status(), 429);
    }
    let throttled: Vec<Value> = audit_of_failures(&admin)
        .await
        .into_iter()
        .filter(|event| event["detail"]["reason"] == "throttled")
        .map(|event| event["detail"]["refused"].clone())
        .collect();
    assert_eq!(
        throttled,
        [10, 1],
        "rows at the 1st and 10th refusal, newest first"
    );
}

async fn audit_of_failures(admin: &Client) -> Vec<Value> {
    let page: Value = admin.audit("?limit=200").await.json().await.unwrap();
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["action"] == "login.failed")
        .cloned()
        .collect()
}
