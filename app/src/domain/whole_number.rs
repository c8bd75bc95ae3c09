//! Whole numbers as JSON has them: `30` and `30.0` are the same number (JSON Schema's
//! `integer` admits both), so a field that takes a whole number takes either spelling, and
//! refuses a fraction or a number out of range.

use serde::de::{Deserializer, Error};
use serde::Deserialize;

/// A JSON number that is whole and fits in a `u64`.
fn whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Whole(u64),
        Float(f64),
    }
    match Number::deserialize(deserializer)
        .map_err(|_| D::Error::custom("expected a whole number"))?
    {
        Number::Whole(value) => Ok(value),
        Number::Float(value)
            if value.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&value) =>
        {
            Ok(value as u64)
        }
        Number::Float(value) => Err(D::Error::custom(format!(
            "expected a whole number, not {value}"
        ))),
    }
}

/// A whole number that fits in a `u32`.
pub fn u32_whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let value = whole(deserializer)?;
    u32::try_from(value).map_err(|_| D::Error::custom(format!("{value} is too large")))
}

/// An optional whole number (`null` or absent is none).
pub fn option_u64_whole<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Whole(#[serde(deserialize_with = "whole")] u64);
    Ok(Option::<Whole>::deserialize(deserializer)?.map(|Whole(value)| value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct Policy {
        #[serde(deserialize_with = "u32_whole")]
        seconds: u32,
        #[serde(default, deserialize_with = "option_u64_whole")]
        step: Option<u64>,
    }

    fn parse(value: serde_json::Value) -> Result<Policy, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn a_whole_number_may_be_written_with_a_zero_fraction() {
        let policy = parse(json!({ "seconds": 30.0, "step": 4.0 })).unwrap();
        assert_eq!((policy.seconds, policy.step), (30, Some(4)));
        let policy = parse(json!({ "seconds": 30, "step": null })).unwrap();
        assert_eq!((policy.seconds, policy.step), (30, None));
        assert_eq!(parse(json!({ "seconds": 1 })).unwrap().step, None);
    }

    #[test]
    fn fractions_negatives_and_overflows_are_refused() {
        for seconds in [json!(1.5), json!(-1), json!(4_294_967_296_u64), json!("30")] {
            assert!(parse(json!({ "seconds": seconds })).is_err(), "{seconds}");
        }
        assert!(parse(json!({ "seconds": 1, "step": 0.5 })).is_err());
    }
}
