//! Each API key has its own rate limit (`IDEM_RATE_LIMIT_PER_SECOND`, `IDEM_RATE_LIMIT_BURST`):
//! a key over it gets `429` with `Retry-After`, and nobody else is slowed down by it.

use app::domain::Role;

use crate::helpers::{assert_error, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(a_key_over_its_limit_gets_429_while_another_key_is_served);

async fn a_key_over_its_limit_gets_429_while_another_key_is_served(db: Db) {
    let app = TestApp::spawn_with(db, |config| {
        config.rate_limit_per_second = 1;
        config.rate_limit_burst = 1;
    })
    .await;
    let busy = app.agent("billing").await;
    let calm = app.agent("billing").await;
    let person = app.person(Role::Viewer).await;

    // One a second: however slow this machine, some of fifty requests in a row are too many.
    let mut refused = None;
    for _ in 0..50 {
        let response = busy.get("/v1/operations").await;
        if response.status() == 429 {
            refused = Some(response);
            break;
        }
        assert_eq!(response.status(), 200);
    }
    let refused = refused.expect("the busy key is refused within fifty requests");
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry_after, 1, "one request a second: wait a second");
    assert_error(refused, 429, "too_many_requests").await;

    assert_eq!(
        calm.get("/v1/operations").await.status(),
        200,
        "another key of the same namespace is still served"
    );
    for _ in 0..5 {
        assert_eq!(
            person.get("/v1/operations").await.status(),
            200,
            "people are not limited by the API keys' limit"
        );
    }
}
