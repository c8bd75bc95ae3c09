//! The approval webhook: every new request for approval is POSTed once to
//! `IDEM_APPROVAL_WEBHOOK_URL`, retried with backoff when the receiver fails, sent only by the
//! server whose claim created it, and never in the way of the claim.

use app::domain::Role;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    each_new_request_for_approval_is_posted_once,
    a_receiver_that_fails_twice_gets_it_on_the_third_try,
    a_receiver_that_is_down_does_not_hold_up_the_claim,
    a_redirect_from_the_receiver_is_not_followed,
    without_a_public_url_the_links_are_null,
);

/// A receiver whose every POST is redirected (307, which keeps the method and the body) to
/// `to`; counts the posts it redirected.
async fn redirecting_receiver(to: &str) -> (String, Arc<AtomicUsize>) {
    let redirected = Arc::new(AtomicUsize::new(0));
    let (target, count) = (to.to_owned(), redirected.clone());
    let router = Router::new().route(
        "/hook",
        post(move || async move {
            count.fetch_add(1, Ordering::SeqCst);
            (StatusCode::TEMPORARY_REDIRECT, [("location", target)])
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, redirected)
}

async fn a_redirect_from_the_receiver_is_not_followed(db: Db) {
    let (elsewhere, inbox) = receiver(0).await;
    let (url, redirected) = redirecting_receiver(&elsewhere).await;
    let (_app, agent) = announcing_app(db, &url).await;
    assert_eq!(agent.claim(&wire("wire:redirected")).await.status(), 202);

    let deadline = Instant::now() + Duration::from_secs(20);
    while redirected.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the webhook was never called");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Give a followed redirect the time to arrive, were it followed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        inbox.posts().is_empty(),
        "the request went where nobody configured it to"
    );
}

/// A receiver that is down: idem's log says so, without the URL (it may carry credentials).
#[tokio::test]
async fn the_webhook_url_never_reaches_the_log() {
    let database = idem::storage::testing::TestDatabase::create(Db::Sqlite).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://hook-user:hunter2@127.0.0.1:{closed}/secret-path");
    let store = idem::storage::Database::open(database.url()).await.unwrap();
    let policy = app::domain::ToolPolicy {
        effect: app::domain::Effect::Irreversible,
        ..app::domain::ToolPolicy::default_for_unregistered()
    };
    let name = app::domain::ToolName::try_from("wire").unwrap();
    store.ledger_store().put_tool(&name, &policy).await.unwrap();
    store.close().await;
    let mut server = crate::processes::ServerProcess::start_with_env(
        database.url(),
        &[("IDEM_APPROVAL_WEBHOOK_URL", &url)],
    );
    let key = crate::processes::cli_key(database.url(), "treasury");
    let agent = server.agent(&key);
    let tool = json!({ "tool": "wire", "key": "wire:logged", "args": { "amount_cents": 1 } });
    assert_eq!(agent.claim(&tool).await.status(), 202);

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = Vec::new();
    while !log
        .iter()
        .any(|line: &String| line.contains("could not be reached"))
    {
        assert!(Instant::now() < deadline, "no failed delivery in {log:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        log.extend(server.drain_log());
    }
    for line in &log {
        assert!(
            !line.contains("hunter2") && !line.contains("secret-path"),
            "{line}"
        );
    }
}

/// What a little receiver got: each POST's `Idempotency-Key` and body, in arrival order.
#[derive(Clone, Default)]
pub(crate) struct Inbox {
    posts: Arc<Mutex<Vec<(String, Value)>>>,
    failures_left: Arc<AtomicUsize>,
}

impl Inbox {
    pub(crate) fn posts(&self) -> Vec<(String, Value)> {
        self.posts.lock().unwrap().clone()
    }

    /// The posts once one for the operation with this key has arrived.
    async fn wait_for_key(&self, key: &str) -> Vec<(String, Value)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let posts = self.posts();
            if posts
                .iter()
                .any(|(_, body)| body["operation"]["key"] == key)
            {
                return posts;
            }
            assert!(Instant::now() < deadline, "no POST for {key}: {posts:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn count_for(&self, key: &str) -> usize {
        self.posts()
            .iter()
            .filter(|(_, body)| body["operation"]["key"] == key)
            .count()
    }
}

/// A receiver on a free port that answers 500 to its first `failures` posts, then 200.
pub(crate) async fn receiver(failures: usize) -> (String, Inbox) {
    async fn receive(
        State(inbox): State<Inbox>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> StatusCode {
        let key = headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        inbox.posts.lock().unwrap().push((key, body));
        let failing = inbox
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }
    let inbox = Inbox::default();
    inbox.failures_left.store(failures, Ordering::SeqCst);
    let router = Router::new()
        .route("/hook", post(receive))
        .with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, inbox)
}

/// An app that announces to `url`, with an irreversible tool `wire` and an agent.
async fn announcing_app(db: Db, url: &str) -> (TestApp, Client) {
    announcing_app_at(db, url, Some("https://idem.example/")).await
}

/// [`announcing_app`] reached at `public_url` (`IDEM_PUBLIC_URL`), or with none set.
async fn announcing_app_at(db: Db, url: &str, public_url: Option<&str>) -> (TestApp, Client) {
    let url = url.to_owned();
    let public_url = public_url.map(str::to_owned);
    let app = TestApp::spawn_with(db, |config| {
        config.approval_webhook_url = Some(url);
        config.public_url = public_url;
    })
    .await;
    let admin = app.person(Role::Admin).await;
    let policy = json!({ "effect": "irreversible" });
    assert_eq!(admin.put_tool("wire", &policy).await.status(), 200);
    let agent = app.agent("treasury").await;
    (app, agent)
}

fn wire(key: &str) -> Value {
    json!({ "tool": "wire", "key": key, "args": { "amount_cents": 100_000, "to": "DE89" } })
}

async fn each_new_request_for_approval_is_posted_once(db: Db) {
    let (url, inbox) = receiver(0).await;
    let (_app, agent) = announcing_app(db, &url).await;
    let mut first_id = String::new();
    for _ in 0..3 {
        let answer = agent.claim(&wire("w-1")).await;
        assert_eq!(answer.status(), 202);
        let answer: Value = answer.json().await.unwrap();
        first_id = answer["operation"]["id"].as_str().unwrap().to_owned();
    }
    let not_waiting = json!({ "tool": "refund", "key": "r-1", "args": {} });
    assert_eq!(agent.claim(&not_waiting).await.status(), 201);
    assert_eq!(agent.claim(&wire("w-2")).await.status(), 202);

    // First deliveries go out in order, so once w-2's has arrived, any repeat of w-1 (or a
    // post for the refund) would have arrived before it.
    let posts = inbox.wait_for_key("w-2").await;
    let keys: Vec<&Value> = posts.iter().map(|(_, b)| &b["operation"]["key"]).collect();
    assert_eq!(keys, ["w-1", "w-2"], "one post per new request, in order");
    let (idempotency_key, body) = &posts[0];
    assert_eq!(idempotency_key, &format!("approval_requested:{first_id}"));
    assert_eq!(body["event"], "approval_requested");
    assert_eq!(body["operation"]["id"], first_id);
    assert_eq!(body["operation"]["status"], "awaiting_approval");
    assert_eq!(body["operation"]["namespace"], "treasury");
    assert_eq!(
        body["url"],
        format!("https://idem.example/operations/{first_id}")
    );
    assert_eq!(
        body["approval_url"],
        format!("https://idem.example/approvals/{first_id}")
    );
}

async fn without_a_public_url_the_links_are_null(db: Db) {
    let (url, inbox) = receiver(0).await;
    let (_app, agent) = announcing_app_at(db, &url, None).await;
    assert_eq!(agent.claim(&wire("w-1")).await.status(), 202);

    let posts = inbox.wait_for_key("w-1").await;
    let (_, body) = &posts[0];
    assert_eq!(body["event"], "approval_requested");
    assert!(body["url"].is_null(), "{body}");
    assert!(body["approval_url"].is_null(), "{body}");
}

async fn a_receiver_that_fails_twice_gets_it_on_the_third_try(db: Db) {
    let (url, inbox) = receiver(2).await;
    let (_app, agent) = announcing_app(db, &url).await;
    assert_eq!(agent.claim(&wire("w-1")).await.status(), 202);

    let deadline = Instant::now() + Duration::from_secs(20);
    while inbox.count_for("w-1") < 3 {
        assert!(Instant::now() < deadline, "{:?}", inbox.posts());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let posts = inbox.posts();
    assert!(
        posts.windows(2).all(|pair| pair[0] == pair[1]),
        "every try sends the same body and key"
    );
    // The third try was answered 200: no fourth follows. A later request's first delivery
    // is the next thing the receiver hears.
    assert_eq!(agent.claim(&wire("w-2")).await.status(), 202);
    inbox.wait_for_key("w-2").await;
    assert_eq!(inbox.count_for("w-1"), 3);
}

async fn a_receiver_that_is_down_does_not_hold_up_the_claim(db: Db) {
    // A port that was free a moment ago: connections are refused.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", listener.local_addr().unwrap())
    };
    let (_app, agent) = announcing_app(db, &closed).await;
    for n in 0..3 {
        let answer = agent.claim(&wire(&format!("w-{n}"))).await;
        assert_eq!(answer.status(), 202, "the claim is answered as usual");
    }
    let repeat = agent.claim(&wire("w-0")).await;
    assert_eq!(repeat.status(), 202);
}

/// Two servers on one PostgreSQL database: of many concurrent claims of one new key, spread
/// over both, exactly one creates the request, and only that server posts it.
#[tokio::test]
async fn postgres_two_servers_post_a_contended_request_once() {
    let (url, inbox) = receiver(0).await;
    let (app, agent) = announcing_app(Db::Postgres, &url).await;
    let other = app
        .spawn_beside(|config| config.approval_webhook_url = Some(url.clone()))
        .await;
    let key = app.api_key("treasury").await;
    let other_agent = Client::with_bearer(&other.address, &key);

    let agents = Arc::new([agent, other_agent]);
    let mut claims = Vec::new();
    for n in 0..40 {
        let agents = agents.clone();
        claims.push(tokio::spawn(async move {
            agents[n % 2]
                .claim(&wire("contended"))
                .await
                .status()
                .as_u16()
        }));
    }
    for claim in claims {
        assert_eq!(claim.await.unwrap(), 202);
    }
    // One more new request through each server: each server's first deliveries are in order,
    // so when both have arrived, any second post of the contended one would have too.
    for (n, agent) in agents.iter().enumerate() {
        assert_eq!(
            agent.claim(&wire(&format!("after-{n}"))).await.status(),
            202
        );
    }
    inbox.wait_for_key("after-0").await;
    inbox.wait_for_key("after-1").await;
    assert_eq!(inbox.count_for("contended"), 1);
}
