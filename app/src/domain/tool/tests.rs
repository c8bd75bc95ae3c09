//! Tool policies: defaults, derived promises and validation, as tables.

use super::*;
use serde_json::json;

fn policy(value: serde_json::Value) -> ToolPolicy {
    serde_json::from_value(value).unwrap()
}

#[test]
fn an_empty_registration_gets_the_defaults_of_an_unregistered_tool() {
    let empty = policy(json!({}));
    assert_eq!(empty, ToolPolicy::default_for_unregistered());
    assert_eq!(empty.effect, Effect::NonIdempotentWrite);
    assert_eq!(empty.approval, ApprovalPolicy::Auto);
    assert_eq!((empty.ttl_seconds, empty.lease_seconds), (86_400, 30));
    let executor = policy(json!({"executor": {"url": "http://tool"}}))
        .executor
        .unwrap();
    assert_eq!(
        (executor.timeout_ms, executor.provider_dedupes),
        (5_000, false)
    );
    assert_eq!(executor.reconcile_url, None);
}

#[test]
fn the_api_example_round_trips_with_snake_case_names() {
    let example = json!({
        "effect": "irreversible", "approval": "always", "ttl_seconds": 60, "lease_seconds": 5,
        "approval_ttl_seconds": 600,
        "key_fields": ["order_id"], "ignore_fields": ["reason"], "redact_fields": ["card.number"],
        "executor": {"url": "http://x", "reconcile_url": "https://y", "timeout_ms": 100,
                     "provider_dedupes": true}
    });
    let parsed = policy(example.clone());
    assert_eq!(parsed.effect, Effect::Irreversible);
    assert_eq!(serde_json::to_value(&parsed).unwrap(), example);
    assert!(serde_json::from_value::<ToolPolicy>(json!({"effect": "ReadOnly"})).is_err());
    for (name, effect) in example_effects() {
        assert_eq!(serde_json::to_value(effect).unwrap(), json!(name));
        assert_eq!(effect.to_string(), name);
    }
}

fn example_effects() -> [(&'static str, Effect); 4] {
    [
        ("read_only", Effect::ReadOnly),
        ("idempotent_write", Effect::IdempotentWrite),
        ("non_idempotent_write", Effect::NonIdempotentWrite),
        ("irreversible", Effect::Irreversible),
    ]
}

#[test]
fn approval_takeover_and_guarantee_follow_the_effect() {
    use Effect::*;
    use Guarantee::*;
    // (effect, approval, provider_dedupes, needs_approval, takeover, guarantee)
    let table = [
        (
            ReadOnly,
            ApprovalPolicy::Auto,
            false,
            false,
            true,
            Repeatable,
        ),
        (
            ReadOnly,
            ApprovalPolicy::Always,
            false,
            true,
            true,
            Repeatable,
        ),
        (
            IdempotentWrite,
            ApprovalPolicy::Auto,
            false,
            false,
            true,
            ExactlyOnce,
        ),
        (
            NonIdempotentWrite,
            ApprovalPolicy::Auto,
            false,
            false,
            false,
            AtMostOnce,
        ),
        (
            NonIdempotentWrite,
            ApprovalPolicy::Auto,
            true,
            false,
            false,
            ExactlyOnce,
        ),
        (
            NonIdempotentWrite,
            ApprovalPolicy::Always,
            false,
            true,
            false,
            AtMostOnce,
        ),
        (
            Irreversible,
            ApprovalPolicy::Auto,
            false,
            true,
            false,
            AtMostOnceApproved,
        ),
        (
            Irreversible,
            ApprovalPolicy::Auto,
            true,
            true,
            false,
            AtMostOnceApproved,
        ),
    ];
    for (effect, approval, dedupes, needs_approval, takeover, guarantee) in table {
        let executor = ExecutorConfig {
            url: "http://tool".into(),
            reconcile_url: None,
            timeout_ms: 5_000,
            provider_dedupes: dedupes,
        };
        let tool = ToolPolicy {
            effect,
            approval,
            executor: Some(executor),
            ..ToolPolicy::default()
        };
        let actual = (
            tool.needs_approval(),
            tool.lease_takeover_allowed(),
            tool.guarantee(),
        );
        assert_eq!(
            actual,
            (needs_approval, takeover, guarantee),
            "{effect:?} {approval:?} {dedupes}"
        );
    }
    assert_eq!(ToolPolicy::default().guarantee(), AtMostOnce);
}

#[test]
fn validation_refuses_what_the_ledger_could_not_honour() {
    use ToolPolicyError::*;
    let field_path = |list, path: &str| FieldPath {
        list,
        path: path.into(),
    };
    let table = [
        (json!({}), Ok(())),
        (json!({"ttl_seconds": 1, "lease_seconds": 1}), Ok(())),
        (
            json!({"lease_seconds": 3600, "key_fields": ["a.b"]}),
            Ok(()),
        ),
        (
            json!({"executor": {"url": "HTTPS://x", "timeout_ms": 300000}}),
            Ok(()),
        ),
        (json!({"ttl_seconds": 0}), Err(Ttl)),
        (json!({"lease_seconds": 0}), Err(Lease)),
        (json!({"lease_seconds": 3601}), Err(Lease)),
        (
            json!({"key_fields": [""]}),
            Err(field_path("key_fields", "")),
        ),
        (
            json!({"ignore_fields": ["a..b"]}),
            Err(field_path("ignore_fields", "a..b")),
        ),
        (
            json!({"redact_fields": ["card."]}),
            Err(field_path("redact_fields", "card.")),
        ),
        (
            json!({"executor": {"url": "http://x", "timeout_ms": 0}}),
            Err(Timeout),
        ),
        (
            json!({"executor": {"url": "http://x", "timeout_ms": 300001}}),
            Err(Timeout),
        ),
        (
            json!({"executor": {"url": "ftp://x"}}),
            Err(Url {
                field: "executor.url",
            }),
        ),
        (
            json!({"executor": {"url": "http://"}}),
            Err(Url {
                field: "executor.url",
            }),
        ),
        (
            json!({"executor": {"url": "http://x", "reconcile_url": "x"}}),
            Err(Url {
                field: "executor.reconcile_url",
            }),
        ),
    ];
    for (registration, expected) in table {
        assert_eq!(
            policy(registration.clone()).validate(),
            expected,
            "{registration}"
        );
    }
    assert!(serde_json::from_value::<ToolPolicy>(json!({"ttl_seconds": -1})).is_err());
}

#[test]
fn an_executors_urls_shown_to_non_admins_keep_only_their_origin() {
    let cases = [
        (
            "https://pay.internal/v1/refunds?key=s3cr3t",
            "https://pay.internal",
        ),
        (
            "http://user:pass@10.0.0.5:8080/hook",
            "http://10.0.0.5:8080",
        ),
        ("http://127.0.0.1:4000", "http://127.0.0.1:4000"),
        ("https://h#frag", "https://h"),
        ("no-scheme.example/path", "no-scheme.example"),
    ];
    for (url, origin) in cases {
        assert_eq!(origin_of(url), origin, "{url}");
    }
    let shown = policy(serde_json::json!({ "executor": {
        "url": "https://pay.internal/refund?token=t", "reconcile_url": "https://u:p@pay.internal/lookup",
        "timeout_ms": 900, "provider_dedupes": true } }))
    .without_credentials();
    let executor = shown.executor.unwrap();
    assert_eq!(executor.url, "https://pay.internal");
    assert_eq!(
        executor.reconcile_url.as_deref(),
        Some("https://pay.internal")
    );
    assert_eq!(
        (executor.timeout_ms, executor.provider_dedupes),
        (900, true)
    );
}
