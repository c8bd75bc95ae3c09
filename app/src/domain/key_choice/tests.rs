//! Key choice and key recipes, with the published test vectors.

use super::*;
use proptest::prelude::*;
use serde_json::json;

const DIGEST: &str = "9ca7900e47b3ba1f46f9786f52c565a33b451e2fc6d6d0b2641a7f3434617c41";

fn refund() -> ToolName {
    ToolName::try_from("refund").unwrap()
}

fn args() -> Value {
    json!({"order_id": "1234", "amount_cents": 500})
}

fn policy(key_fields: &[&str], ignore_fields: &[&str]) -> ToolPolicy {
    let strings = |paths: &[&str]| paths.iter().map(|p| p.to_string()).collect();
    ToolPolicy {
        key_fields: strings(key_fields),
        ignore_fields: strings(ignore_fields),
        ..ToolPolicy::default()
    }
}

// Regression vectors: computed once (independently, from the recipe) and fixed for good,
// since clients reproduce these keys.
#[test]
fn derived_keys_match_the_published_vectors() {
    // SHA-256 of the run ids: "r" 129 times, and "лог-1" in UTF-8.
    const LONG_RUN_HASH: &str = "823571b215e235cb47fd8a5f9b7e23679d6174a9039c4983e7603c374a5c1637";
    const CYRILLIC_RUN_HASH: &str =
        "84bbd596f51ca9250873a33449e8b9f3b20d9545f0b1fd843608e16b9794d632";
    let long_run = "r".repeat(129);
    let longest_run = "r".repeat(128);
    let table = [
        ("run-42", 4, format!("run:run-42:step:4:{DIGEST}")),
        ("a:step:1", 2, format!("run:a:step:1:step:2:{DIGEST}")),
        (
            &longest_run,
            u64::MAX,
            format!("run:{longest_run}:step:18446744073709551615:{DIGEST}"),
        ),
        (
            &long_run,
            4,
            format!("run-sha256:{LONG_RUN_HASH}:step:4:{DIGEST}"),
        ),
        (
            "лог-1",
            0,
            format!("run-sha256:{CYRILLIC_RUN_HASH}:step:0:{DIGEST}"),
        ),
    ];
    for (run_id, step, expected) in table {
        let key = derive_key(run_id, step, &refund(), &args());
        assert_eq!(key.as_str(), expected, "{run_id}");
        assert!(key.as_str().len() <= 223);
    }
}

#[test]
fn business_keys_from_key_fields_match_the_published_vectors() {
    let customer = json!({"customer": {"id": 7, "name": "Ann"}, "order_id": "1234"});
    let table = [
        (
            args(),
            vec!["order_id"],
            r#"refund:{"order_id":"1234"}"#.to_owned(),
        ),
        (
            customer,
            vec!["order_id", "customer.id"],
            r#"refund:{"customer.id":7,"order_id":"1234"}"#.to_owned(),
        ),
        (
            json!({"note": "x".repeat(300)}),
            vec!["note"],
            "refund:sha256:1bbf0c71d049ad4a82d7485d8dbefae84ac95a335a5c5d3f058d551797185a99"
                .to_owned(),
        ),
        (
            json!({"name": "Zoë"}),
            vec!["name"],
            "refund:sha256:6bd0ee7972d372ec1f8a3cc44302e5449751305d73c2b69b5a79c62f88a4ca77"
                .to_owned(),
        ),
        (
            json!({"id": null}),
            vec!["id"],
            r#"refund:{"id":null}"#.to_owned(),
        ),
    ];
    for (args, fields, expected) in table {
        let fields: Vec<String> = fields.into_iter().map(String::from).collect();
        let key = business_key_from_fields(&refund(), &args, &fields, &[]).unwrap();
        assert_eq!(key.as_str(), expected);
    }
}

/// A key is stored and shown as it is: a key field that redaction would hide (by the default
/// rules or the tool's `redact_fields`) makes the key a hash, never readable.
#[test]
fn a_key_field_holding_a_secret_is_hashed_into_the_key() {
    let args = json!({
        "card": { "number": "4242424242424242" },
        "pin": "1234",
        "order_id": "1234"
    });
    let cases: [(&[&str], &[&str]); 3] = [
        (&["card.number"], &[]),
        (&["order_id", "card"], &[]),
        (&["order_id", "pin"], &["pin"]),
    ];
    for (fields, redact_fields) in cases {
        let fields: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        let redact_fields: Vec<String> = redact_fields.iter().map(|f| f.to_string()).collect();
        let key = business_key_from_fields(&refund(), &args, &fields, &redact_fields).unwrap();
        assert!(
            key.as_str().starts_with("refund:sha256:"),
            "{fields:?}: {key:?}"
        );
        assert!(!key.as_str().contains("4242") && !key.as_str().contains("1234"));
    }
    let plain = ["order_id".to_owned()];
    let key = business_key_from_fields(&refund(), &args, &plain, &[]).unwrap();
    assert_eq!(key.as_str(), r#"refund:{"order_id":"1234"}"#);
}

#[test]
fn a_key_field_missing_from_the_args_is_an_error() {
    let error = business_key_from_fields(&refund(), &args(), &["order.id".to_owned()], &[]);
    assert_eq!(
        error,
        Err(KeyError::MissingKeyField {
            field: "order.id".to_owned()
        })
    );
    assert_eq!(error.unwrap_err().code(), "missing_key_field");
}

#[test]
fn the_first_key_given_wins_in_the_order_of_the_api() {
    use KeySource::*;
    let plain = policy(&[], &[]);
    let keyed = policy(&["order_id"], &[]);
    let run = |run_id, step| KeyChoice {
        run_id,
        step,
        ..KeyChoice::default()
    };
    let table: [(KeyChoice, &ToolPolicy, &str, KeySource); 8] = [
        (
            KeyChoice {
                header: Some("h"),
                key: Some("h"),
                business_key: Some("b"),
                run_id: Some("r"),
                step: Some(1),
            },
            &keyed,
            "h",
            Header,
        ),
        (
            KeyChoice {
                header: Some("h"),
                ..run(Some("r"), Some(1))
            },
            &keyed,
            "h",
            Header,
        ),
        (
            KeyChoice {
                key: Some("k"),
                business_key: Some("b"),
                ..run(Some("r"), Some(1))
            },
            &keyed,
            "k",
            Body,
        ),
        (
            KeyChoice {
                business_key: Some("b"),
                ..run(Some("r"), Some(1))
            },
            &keyed,
            "b",
            Business,
        ),
        (
            run(Some("r"), Some(1)),
            &keyed,
            r#"refund:{"order_id":"1234"}"#,
            Business,
        ),
        (
            run(None, None),
            &keyed,
            r#"refund:{"order_id":"1234"}"#,
            Business,
        ),
        (
            run(Some("run-42"), Some(4)),
            &plain,
            &format!("run:run-42:step:4:{DIGEST}"),
            Derived,
        ),
        (
            run(Some("run-42"), Some(0)),
            &plain,
            &format!("run:run-42:step:0:{DIGEST}"),
            Derived,
        ),
    ];
    for (choice, policy, key, source) in table {
        let chosen = choice.resolve(&refund(), &args(), policy).unwrap();
        assert_eq!((chosen.0.as_str(), chosen.1), (key, source), "{choice:?}");
    }
}

#[test]
fn claims_without_a_usable_key_are_refused_with_the_api_codes() {
    let plain = policy(&[], &[]);
    let keyed = policy(&["missing"], &[]);
    let table: [(KeyChoice, &ToolPolicy, &str); 8] = [
        (KeyChoice::default(), &plain, "missing_idempotency_key"),
        (
            KeyChoice {
                run_id: Some("r"),
                ..KeyChoice::default()
            },
            &plain,
            "missing_idempotency_key",
        ),
        (
            KeyChoice {
                step: Some(4),
                ..KeyChoice::default()
            },
            &plain,
            "missing_idempotency_key",
        ),
        (
            KeyChoice {
                run_id: Some(""),
                step: Some(4),
                ..KeyChoice::default()
            },
            &plain,
            "missing_idempotency_key",
        ),
        (
            KeyChoice {
                header: Some("a"),
                key: Some("b"),
                ..KeyChoice::default()
            },
            &plain,
            "conflicting_idempotency_keys",
        ),
        (
            KeyChoice {
                header: Some(""),
                ..KeyChoice::default()
            },
            &plain,
            "invalid_idempotency_key",
        ),
        (
            KeyChoice {
                header: Some("a"),
                key: Some("bad\n"),
                ..KeyChoice::default()
            },
            &plain,
            "invalid_idempotency_key",
        ),
        (
            KeyChoice {
                run_id: Some("r"),
                step: Some(4),
                ..KeyChoice::default()
            },
            &keyed,
            "missing_key_field",
        ),
    ];
    for (choice, policy, code) in table {
        let error = choice.resolve(&refund(), &args(), policy).unwrap_err();
        assert_eq!(error.code(), code, "{choice:?}");
    }
    let business = KeyChoice {
        business_key: Some("é"),
        ..KeyChoice::default()
    };
    let error = business.resolve(&refund(), &args(), &plain).unwrap_err();
    let expected = "business_key: an idempotency key must be printable ASCII (space to '~'); \
                    character 1 is not";
    assert_eq!(error.to_string(), expected);
}

#[test]
fn derived_keys_leave_out_the_fields_the_tool_ignores() {
    let ignoring = policy(&[], &["reason"]);
    let choice = KeyChoice {
        run_id: Some("run-42"),
        step: Some(4),
        ..KeyChoice::default()
    };
    let mut with_reason = args();
    with_reason["reason"] = json!("the customer asked twice");
    let (key, _) = choice.resolve(&refund(), &with_reason, &ignoring).unwrap();
    assert_eq!(key.as_str(), format!("run:run-42:step:4:{DIGEST}"));
}

proptest! {
    #[test]
    fn different_args_derive_different_keys(
        a in prop::collection::btree_map("[a-c]{1,2}", any::<i32>(), 0..4),
        b in prop::collection::btree_map("[a-c]{1,2}", any::<i32>(), 0..4),
    ) {
        let key = |members: &std::collections::BTreeMap<String, i32>| {
            derive_key("run-1", 1, &refund(), &json!(members))
        };
        prop_assert_eq!(a == b, key(&a) == key(&b));
    }
}

/// Anything a client might send: empty, printable, long, non-ASCII, control characters.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ -~]{1,300}",
        "\\PC{0,40}",
        ".{0,20}",
        "[a-z.]{0,12}",
    ]
}

fn any_args() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        any_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z.]{0,6}", inner, 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Whatever the client sends and whatever the tool's policy says, choosing a key answers
    /// (a key or a reason), never panics, and a key is always a valid one.
    #[test]
    fn key_choice_never_panics_and_only_yields_valid_keys(
        header in prop::option::of(any_text()),
        key in prop::option::of(any_text()),
        business_key in prop::option::of(any_text()),
        run_id in prop::option::of(any_text()),
        step in prop::option::of(any::<u64>()),
        args in any_args(),
        key_fields in prop::collection::vec(any_text(), 0..3),
        ignore_fields in prop::collection::vec(any_text(), 0..3),
    ) {
        let choice = KeyChoice {
            header: header.as_deref(),
            key: key.as_deref(),
            business_key: business_key.as_deref(),
            run_id: run_id.as_deref(),
            step,
        };
        let policy = ToolPolicy { key_fields, ignore_fields, ..ToolPolicy::default() };
        if let Ok((key, _)) = choice.resolve(&refund(), &args, &policy) {
            prop_assert!(IdempotencyKey::try_from(key.as_str()).is_ok());
            prop_assert!(key.as_str().len() <= MAX_KEY_LEN);
        }
    }
}
