//! Bounded resources for one misbehaving agent: caps on waiting requests and change streams
//! (`429` with `Retry-After` beyond them), and streams that end with their credentials.

use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::timeout;

use crate::helpers::{assert_error, Client, Db, TestApp};
use crate::on_both_databases;
use app::domain::Role;

on_both_databases!(
    a_key_over_its_cap_of_waiting_requests_is_answered_429,
    a_key_over_its_cap_of_streams_is_answered_429_until_one_closes,
    the_servers_cap_of_streams_counts_people_too,
    a_stream_ends_once_its_key_is_revoked,
    a_stream_ends_once_its_session_is_signed_out,
);

/// A change stream held open, read chunk by chunk.
struct Stream(reqwest::Response);

impl Stream {
    async fn open(client: &Client) -> Result<Self, reqwest::Response> {
        let response = client.get("/v1/operations/changes").await;
        if response.status() == 200 {
            Ok(Self(response))
        } else {
            Err(response)
        }
    }

    /// Whether the server ends the stream within 10 s (keep-alive comments are read past).
    async fn ends(mut self) -> bool {
        let ended = timeout(Duration::from_secs(10), async {
            while let Ok(Some(_)) = self.0.chunk().await {}
        });
        ended.await.is_ok()
    }
}

fn with_short_keep_alive(config: &mut idem::config::ServeConfig) {
    config.stream_keep_alive_ms = 100;
}

async fn a_key_over_its_cap_of_waiting_requests_is_answered_429(db: Db) {
    let app = TestApp::spawn_with(db, |config| config.max_waits_per_key = 1).await;
    let agent = app.agent("shop").await;
    let body = json!({ "tool": "refund", "key": "r-1", "args": {} });
    let (id, token, _) = agent.start(&body).await;
    let waiting = |agent: Client, body: Value| async move {
        let request = agent.http.post(agent.url("/v1/operations"));
        request
            .header("prefer", "wait=10")
            .json(&body)
            .send()
            .await
            .unwrap()
    };
    let first = tokio::spawn(waiting(agent.clone(), body.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let refused = waiting(agent.clone(), body.clone()).await;
    assert_eq!(refused.headers()["retry-after"], "5");
    assert_error(refused, 429, "too_many_requests").await;
    let other_key = app.agent("shop").await;
    let elsewhere = other_key
        .claim(&json!({ "tool": "refund", "key": "r-2", "args": {} }))
        .await;
    assert_eq!(elsewhere.status(), 201, "another key is not held back");

    let done = json!({ "lease_token": token, "outcome": "succeeded", "result": {} });
    assert_eq!(agent.complete(&id, &done).await.status(), 200);
    assert_eq!(
        first.await.unwrap().status(),
        200,
        "the waiter got the outcome"
    );
    let again = waiting(agent.clone(), body).await;
    assert_eq!(again.status(), 200, "the place came free");
}

async fn a_key_over_its_cap_of_streams_is_answered_429_until_one_closes(db: Db) {
    let app = TestApp::spawn_with(db, |config| {
        config.max_streams_per_key = 2;
        with_short_keep_alive(config);
    })
    .await;
    let agent = app.agent("shop").await;
    let first = Stream::open(&agent).await.ok().unwrap();
    let _second = Stream::open(&agent).await.ok().unwrap();
    let refused = Stream::open(&agent).await.err().unwrap();
    assert!(refused.headers().contains_key("retry-after"));
    assert_error(refused, 429, "too_many_requests").await;
    assert!(
        Stream::open(&app.agent("shop").await).await.is_ok(),
        "another key has its own cap"
    );

    drop(first);
    let mut reopened = Stream::open(&agent).await;
    for _ in 0..50 {
        if reopened.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        reopened = Stream::open(&agent).await;
    }
    assert!(reopened.is_ok(), "a closed stream gives its place back");
}

async fn the_servers_cap_of_streams_counts_people_too(db: Db) {
    let app = TestApp::spawn_with(db, |config| config.max_streams = 2).await;
    let viewer = app.person(Role::Viewer).await;
    let _one = Stream::open(&viewer).await.ok().unwrap();
    let _two = Stream::open(&app.agent("shop").await).await.ok().unwrap();
    let refused = Stream::open(&viewer).await.err().unwrap();
    assert_error(refused, 429, "too_many_requests").await;
}

async fn a_stream_ends_once_its_key_is_revoked(db: Db) {
    let app = TestApp::spawn_with(db, with_short_keep_alive).await;
    let namespace = "shop".try_into().unwrap();
    let (info, secret) = app
        .state
        .identity
        .create_api_key(namespace, None)
        .await
        .unwrap();
    let agent = app.agent_with_key(secret.expose());
    let kept = Stream::open(&app.agent("shop").await).await.ok().unwrap();
    let stream = Stream::open(&agent).await.ok().unwrap();

    let admin = app.person(Role::Admin).await;
    let revoked = admin.revoke_key(&info.id.to_string()).await;
    assert_eq!(revoked.status(), 204);
    assert!(stream.ends().await, "the revoked key's stream ends");
    assert!(
        timeout(Duration::from_millis(500), kept.ends())
            .await
            .is_err(),
        "a stream of a valid key stays open"
    );
}

async fn a_stream_ends_once_its_session_is_signed_out(db: Db) {
    let app = TestApp::spawn_with(db, with_short_keep_alive).await;
    let viewer = app.person(Role::Viewer).await;
    let stream = Stream::open(&viewer).await.ok().unwrap();
    assert_eq!(viewer.logout().await.status(), 204);
    assert!(stream.ends().await, "the ended session's stream ends");
}

mod events_pages {
    use super::*;

    on_both_databases!(
        the_trail_reads_in_pages_oldest_or_newest_first_and_misses_nothing,
        bad_page_parameters_are_refused_and_change_nothing,
    );

    /// An operation with its claim, its completion and `replays` replays.
    async fn replayed(agent: &Client, replays: usize) -> String {
        let body = json!({ "tool": "refund", "key": "r-9", "args": { "amount": 3 } });
        let (id, token, _) = agent.start(&body).await;
        let done = json!({ "lease_token": token, "outcome": "succeeded", "result": {} });
        assert_eq!(agent.complete(&id, &done).await.status(), 200);
        for _ in 0..replays {
            assert_eq!(agent.claim(&body).await.status(), 200);
        }
        id
    }

    async fn page(agent: &Client, id: &str, query: &str) -> Value {
        let response = agent
            .get(&format!("/v1/operations/{id}/events{query}"))
            .await;
        assert_eq!(response.status(), 200, "{query}");
        response.json().await.unwrap()
    }

    /// Every page from `query` on, following `next_cursor`.
    async fn all_pages(agent: &Client, id: &str, query: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut next = page(agent, id, query).await;
        loop {
            events.extend(next["events"].as_array().unwrap().iter().cloned());
            let Some(cursor) = next["next_cursor"].as_str() else {
                return events;
            };
            next = page(agent, id, &format!("{query}&cursor={cursor}")).await;
        }
    }

    async fn the_trail_reads_in_pages_oldest_or_newest_first_and_misses_nothing(db: Db) {
        let app = TestApp::spawn(db).await;
        let agent = app.agent("shop").await;
        let id = replayed(&agent, 23).await;
        let whole = page(&agent, &id, "").await;
        assert!(
            whole["next_cursor"].is_null(),
            "one page holds a short trail"
        );
        let whole = whole["events"].as_array().unwrap().clone();
        assert_eq!(whole.len(), 25, "claimed, completed and 23 replays");
        assert_eq!(whole[0]["kind"], "claimed");

        let first = page(&agent, &id, "?limit=10").await;
        assert_eq!(first["events"].as_array().unwrap().len(), 10);
        assert!(first["next_cursor"].is_string());
        assert_eq!(all_pages(&agent, &id, "?limit=10").await, whole);
        assert_eq!(all_pages(&agent, &id, "?limit=7&order=oldest").await, whole);
        let mut newest_first = whole.clone();
        newest_first.reverse();
        assert_eq!(
            all_pages(&agent, &id, "?limit=4&order=newest").await,
            newest_first
        );
    }

    async fn bad_page_parameters_are_refused_and_change_nothing(db: Db) {
        let app = TestApp::spawn(db).await;
        let agent = app.agent("shop").await;
        let id = replayed(&agent, 1).await;
        for (query, code) in [
            ("?limit=0", "invalid_limit"),
            ("?limit=1001", "invalid_limit"),
            ("?cursor=c1_nope", "invalid_cursor"),
            ("?cursor=e1_12_x", "invalid_cursor"),
            ("?order=sideways", "invalid_order"),
        ] {
            let response = agent
                .get(&format!("/v1/operations/{id}/events{query}"))
                .await;
            assert_error(response, 400, code).await;
        }
        let events = page(&agent, &id, "").await;
        assert_eq!(events["events"].as_array().unwrap().len(), 3);
    }
}
