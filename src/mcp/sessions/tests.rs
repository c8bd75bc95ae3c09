use super::*;
use rmcp::model::NumberOrString;
use serde_json::{json, Value};

fn notification(method: &str, params: Value) -> ServerNotification {
    let message = json!({ "method": method, "params": params });
    serde_json::from_value(message).unwrap_or_else(|e| panic!("{method}: {e}"))
}

#[test]
fn each_upstream_notification_goes_to_its_audience() {
    let token = ProgressToken(NumberOrString::Number(3));
    let rows = [
        (
            "notifications/progress",
            json!({ "progressToken": 3, "progress": 1 }),
            Audience::Requester(token),
        ),
        (
            "notifications/resources/updated",
            json!({ "uri": "sandbox://orders/42" }),
            Audience::Subscribers("sandbox://orders/42".into()),
        ),
        (
            "notifications/tools/list_changed",
            json!({}),
            Audience::Everyone,
        ),
        (
            "notifications/resources/list_changed",
            json!({}),
            Audience::Everyone,
        ),
        (
            "notifications/prompts/list_changed",
            json!({}),
            Audience::Everyone,
        ),
        (
            "notifications/message",
            json!({ "level": "info", "data": "hello" }),
            Audience::Everyone,
        ),
        (
            "notifications/something_custom",
            json!({ "x": 1 }),
            Audience::Everyone,
        ),
        (
            "notifications/cancelled",
            json!({ "requestId": 9 }),
            Audience::Nobody,
        ),
    ];
    for (method, params, expected) in rows {
        assert_eq!(
            audience(&notification(method, params)),
            expected,
            "{method}"
        );
    }
}

#[test]
fn the_upstream_subscription_ends_with_its_last_subscriber() {
    let (one, two) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let mut subscriptions = Subscriptions::default();
    subscriptions.add("a", one);
    subscriptions.add("a", two);
    subscriptions.add("b", one);

    assert!(!subscriptions.remove("a", one), "two still holds a");
    assert_eq!(subscriptions.holders("a"), vec![two]);
    assert!(subscriptions.remove("a", two), "nobody holds a");
    assert!(
        subscriptions.remove("c", one),
        "never held: nothing upstream to keep"
    );

    subscriptions.add("a", two);
    assert_eq!(subscriptions.leave(one), vec!["b".to_owned()]);
    assert!(subscriptions.leave(two) == vec!["a".to_owned()]);
    assert!(subscriptions.holders("a").is_empty());
}
