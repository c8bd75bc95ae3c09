//! Redaction rules as tables.

use super::*;
use serde_json::json;

#[test]
fn luhn_separates_real_card_numbers_from_near_misses() {
    let table = [
        ("4111111111111111", true),
        ("4111111111111112", false),
        ("5555555555554444", true),
        ("378282246310005", true),
        ("6011111111111117", true),
        ("4222222222222", true),
        ("4000000000000000006", true),
        ("411111111117", false),
        ("40000000000000000002", false),
        ("4111 1111 1111 1111", true),
        ("4111-1111-1111-1111", true),
        ("3782 822463 10005", true),
        ("4111  1111 1111 1111", false),
        (" 4111111111111111", false),
        ("4111111111111111 ", false),
        ("4111111111111111-", false),
        ("4111.1111.1111.1111", false),
        ("card 4111111111111111", false),
        ("", false),
    ];
    for (text, expected) in table {
        assert_eq!(is_card_number(text), expected, "{text:?}");
    }
}

#[test]
fn secrets_and_card_numbers_are_redacted_at_any_depth() {
    let r = REDACTED;
    let table = [
        (
            json!({"order_id": "1234", "amount_cents": 500}),
            json!({"order_id": "1234", "amount_cents": 500}),
        ),
        (
            json!({"password": "p", "user": "ann"}),
            json!({"password": r, "user": "ann"}),
        ),
        (
            json!({"DB_Password": "p", "client_secret": "s", "refresh_token": {"v": 1},
                   "apiKey": "k", "X-Api-Key": "k", "Authorization": "Bearer x", "cvv2": "123",
                   "card_cvc": 1}),
            json!({"DB_Password": r, "client_secret": r, "refresh_token": r, "apiKey": r,
                   "X-Api-Key": r, "Authorization": r, "cvv2": r, "card_cvc": r}),
        ),
        (
            json!({"card_number": "x", "cardNumber": "x", "PAN": "x", "pane": "window", "span": 1}),
            json!({"card_number": r, "cardNumber": r, "PAN": r, "pane": "window", "span": 1}),
        ),
        (
            json!({"card": {"number": "x", "exp": "12/30"}, "order": {"number": 42}}),
            json!({"card": {"number": r, "exp": "12/30"}, "order": {"number": 42}}),
        ),
        (
            json!({"items": [{"meta": [{"secret": 1}, "4111 1111 1111 1111",
                                       "4111111111111112"]}]}),
            json!({"items": [{"meta": [{"secret": r}, r, "4111111111111112"]}]}),
        ),
        (
            json!({"note": "4111111111111111", "n": 4111111111111111u64, "m": 4111111111111112u64,
                   "neg": -4111111111111111i64, "f": 4111111111111111.5, "small": 42}),
            json!({"note": r, "n": r, "m": 4111111111111112u64,
                   "neg": r, "f": 4111111111111111.5, "small": 42}),
        ),
        (
            json!(["4111111111111111", {"Card": {"Number": 1}}]),
            json!([r, {"Card": {"Number": r}}]),
        ),
    ];
    for (args, expected) in table {
        assert_eq!(redact(&args, &[]), expected, "{args}");
    }
}

#[test]
fn the_tools_redact_fields_are_redacted_too() {
    let args = json!({"customer": {"email": "a@b.c", "name": "Ann"},
                      "lines": [{"memo": "m"}, {"memo": "n"}], "reason": "x"});
    let paths = [
        "customer.email".to_owned(),
        "lines.memo".to_owned(),
        "absent.path".to_owned(),
    ];
    let expected = json!({"customer": {"email": REDACTED, "name": "Ann"},
                          "lines": [{"memo": REDACTED}, {"memo": REDACTED}], "reason": "x"});
    assert_eq!(redact(&args, &paths), expected);
}

#[test]
fn an_answer_hides_what_the_arguments_hid_wherever_it_echoes_it() {
    let args = redact(
        &json!({"customer": {"email": "a@b.c", "name": "Ann"}, "amount": 5}),
        &["customer.email".to_owned()],
    );
    let answer = json!({"id": "re_1", "customer": {"email": "a@b.c"},
                        "args": {"customer": {"email": "a@b.c", "name": "Ann"}, "amount": 5},
                        "items": [{"customer": {"email": "c@d.e"}}],
                        "api_token": "t0k", "card": "4111 1111 1111 1111"});
    let expected = json!({"id": "re_1", "customer": {"email": REDACTED},
                          "args": {"customer": {"email": REDACTED, "name": "Ann"}, "amount": 5},
                          "items": [{"customer": {"email": REDACTED}}],
                          "api_token": REDACTED, "card": REDACTED});
    assert_eq!(redact_answer(&answer, &args), expected);
}

#[test]
fn an_answer_of_plain_arguments_loses_only_secrets() {
    let args = json!({"order_id": "1234"});
    let answer = json!({"refund_id": "re_1", "order_id": "1234", "status": "done"});
    assert_eq!(redact_answer(&answer, &args), answer);
    assert_eq!(redact_answer(&json!("ok"), &args), json!("ok"));
}

#[test]
fn redaction_leaves_the_original_untouched() {
    let args = json!({"password": "p"});
    let _ = redact(&args, &[]);
    assert_eq!(args, json!({"password": "p"}));
}

/// Found by the redaction property below: a card number sent as a float (`json.dumps` of a
/// Python float writes `4111111111111111.0`) or with an exponent or a sign was stored with
/// its digits intact.
#[test]
fn card_numbers_spelled_as_floats_or_signed_are_redacted() {
    let spellings = [
        "4111111111111111.0",
        "4.111111111111111e15",
        "41111111111111110e-1",
        "-4111111111111111",
        "-4111111111111111.0",
        "6011111111111117.000",
    ];
    for spelling in spellings {
        let args: Value = serde_json::from_str(&format!(r#"{{"amount": {spelling}}}"#)).unwrap();
        assert_eq!(
            redact(&args, &[]),
            json!({"amount": REDACTED}),
            "{spelling}"
        );
    }
    let not_cards = ["4111111111111112.0", "4111111111111111.5", "1e300", "-0.0"];
    for spelling in not_cards {
        let args: Value = serde_json::from_str(&format!(r#"{{"amount": {spelling}}}"#)).unwrap();
        assert_eq!(redact(&args, &[]), args, "{spelling}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A card number: a digit from 1 to 9 (JSON numbers have no leading zero), 11 to 17 random
    /// digits, and the one check digit of ten that passes the Luhn check.
    fn card_number() -> impl Strategy<Value = String> {
        (1u8..10, prop::collection::vec(0u8..10, 11..=17)).prop_map(|(first, rest)| {
            let prefix: String = std::iter::once(first)
                .chain(rest)
                .map(|d| char::from(b'0' + d))
                .collect();
            (0..10)
                .map(|check| format!("{prefix}{check}"))
                .find(|candidate| is_card_number(candidate))
                .expect("exactly one check digit passes")
        })
    }

    /// The card number as a client might send it, as JSON text.
    fn spelled(digits: &str, how: u8) -> String {
        let grouped = |sep: &str| {
            let chunks: Vec<String> = digits
                .as_bytes()
                .chunks(4)
                .map(|c| String::from_utf8(c.to_vec()).unwrap())
                .collect();
            chunks.join(sep)
        };
        let exact_as_double = digits.parse::<u64>().unwrap() < (1 << 53);
        match how % 7 {
            0 => format!("\"{digits}\""),
            1 => format!("\"{}\"", grouped(" ")),
            2 => format!("\"{}\"", grouped("-")),
            3 => digits.to_owned(),
            4 => format!("-{digits}"),
            5 if exact_as_double => format!("{digits}.0"),
            6 if exact_as_double => {
                format!("{}.{}e{}", &digits[..1], &digits[1..], digits.len() - 1)
            }
            _ => digits.to_owned(),
        }
    }

    /// JSON with names that look harmless and leaves that hold no long digit runs.
    fn harmless_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-1000i64..1000).prop_map(Value::from),
            "[a-z ]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,8}", inner, 0..5)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    /// Walks down `value` by the choices and puts `leaf` there (into an object under a new
    /// name, into an array as a new element, or in place of a scalar).
    fn plant(value: &mut Value, choices: &[usize], leaf: Value) {
        match (value, choices.split_first()) {
            (Value::Object(members), Some((&choice, rest))) if !members.is_empty() => {
                let name = members.keys().nth(choice % members.len()).unwrap().clone();
                plant(members.get_mut(&name).unwrap(), rest, leaf);
            }
            (Value::Array(items), Some((&choice, rest))) if !items.is_empty() => {
                let len = items.len();
                plant(&mut items[choice % len], rest, leaf);
            }
            (Value::Object(members), _) => {
                members.insert("planted".into(), leaf);
            }
            (Value::Array(items), _) => items.push(leaf),
            (slot, _) => *slot = leaf,
        }
    }

    proptest! {
        #[test]
        fn no_luhn_valid_card_number_survives_redaction_at_any_depth(
            tree in harmless_json(),
            choices in prop::collection::vec(any::<usize>(), 0..8),
            digits in card_number(),
            how in any::<u8>(),
        ) {
            let text = spelled(&digits, how);
            let leaf: Value = serde_json::from_str(&text).unwrap();
            let mut args = json!({ "args": tree });
            plant(&mut args, &choices, leaf);
            let stored = serde_json::to_string(&redact(&args, &[])).unwrap();
            let without_separators: String =
                stored.chars().filter(|c| !matches!(c, ' ' | '-' | '.')).collect();
            prop_assert!(!without_separators.contains(&digits), "{} leaked from {}", text, stored);
        }
    }
}
