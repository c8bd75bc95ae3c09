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
                   "neg": -4111111111111111i64, "f": 4111111111111111.5, "small": 42}),
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
fn redaction_leaves_the_original_untouched() {
    let args = json!({"password": "p"});
    let _ = redact(&args, &[]);
    assert_eq!(args, json!({"password": "p"}));
}
