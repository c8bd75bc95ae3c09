//! What the fuzz targets check beyond "does not panic".

use app::domain::is_card_number;
use serde_json::Value;

/// Panics if a string, or a number that is a whole number however it is spelled, anywhere in
/// `value` is a card number: redaction must have replaced it.
pub fn assert_no_card_numbers(value: &Value) {
    match value {
        Value::String(text) => assert!(!is_card_number(text), "card number kept: {text}"),
        Value::Number(number) => {
            let digits = number
                .as_u64()
                .map(|n| n.to_string())
                .or_else(|| number.as_i64().map(|n| n.unsigned_abs().to_string()))
                .or_else(|| {
                    let f = number.as_f64()?.abs();
                    (f.fract() == 0.0 && f < 1e19).then(|| format!("{f:.0}"))
                });
            if let Some(digits) = digits {
                assert!(!is_card_number(&digits), "card number kept: {number}");
            }
        }
        Value::Array(items) => items.iter().for_each(assert_no_card_numbers),
        Value::Object(members) => members.values().for_each(assert_no_card_numbers),
        Value::Null | Value::Bool(_) => {}
    }
}
