//! Canonical JSON: RFC 8785, the JSON Canonicalization Scheme (JCS).
//!
//! Two spellings of the same JSON value canonicalize to the same bytes, which is what makes a
//! fingerprint or a derived key independent of how a client happened to write its arguments:
//!
//! - no whitespace outside strings;
//! - object members sorted by their names compared as UTF-16 code units (not as UTF-8 bytes,
//!   which differ for characters above U+FFFF);
//! - strings written as UTF-8, escaping only `"`, `\` and the control characters below U+0020
//!   (`\b \t \n \f \r`, the rest as `\u00xx` with lowercase hex); `/`, DEL and U+2028 stay as
//!   they are;
//! - numbers as ECMAScript's `Number.prototype.toString` writes the nearest IEEE 754 double:
//!   `1.0` → `1`, `-0` → `0`, `1e21` → `1e+21`, `0.000001` → `0.000001`, `1e-7` → `1e-7`.
//!
//! Every number is a double, as in JavaScript, so integers beyond 2^53 lose precision by
//! design: `9007199254740993` canonicalizes to `9007199254740992`, and two arguments that differ
//! only there look the same. Clients that need exact big integers send them as strings.
//! serde_json is used without `arbitrary_precision`, so parsed numbers already are `u64`, `i64`
//! or `f64`, and `float_roundtrip` makes their parsing exact.
//!
//! A JSON text with the same name twice in one object is not I-JSON; serde_json keeps the last
//! value, and so does everything computed from it here.
//!
//! The serialization itself is the `serde_json_canonicalizer` crate's; the tests below hold it to
//! the RFC's own examples.

use serde_json::Value;

/// How deeply arrays and objects may nest in a request (see [`depth`]).
pub const MAX_DEPTH: usize = 64;

/// The RFC 8785 canonical form of `value`.
pub fn canonical_json(value: &Value) -> String {
    // A Value holds only finite numbers, unique member names and valid UTF-8, and writing into a
    // Vec cannot fail, so JCS has nothing to refuse here.
    serde_json_canonicalizer::to_string(value).expect("every serde_json::Value has a JCS form")
}

/// How deeply `value` nests: 0 for a scalar, 1 for `[]`, `{}` or `[1]`, 2 for `{"a": []}`.
///
/// Walks with its own stack, so it cannot overflow the thread's however deep the value is.
pub fn depth(value: &Value) -> usize {
    deepest(value, usize::MAX)
}

/// A value nested deeper than the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("JSON must not nest deeper than {max} levels")]
pub struct TooDeep {
    /// The limit that was passed.
    pub max: usize,
}

/// Refuses a value that nests deeper than `max` levels (as counted by [`depth`]); stops looking
/// as soon as it finds one.
pub fn check_depth(value: &Value, max: usize) -> Result<(), TooDeep> {
    if deepest(value, max) > max {
        Err(TooDeep { max })
    } else {
        Ok(())
    }
}

/// The depth of `value`, or some depth above `stop_above` as soon as one is found.
fn deepest(value: &Value, stop_above: usize) -> usize {
    let mut stack = vec![(value, 0usize)];
    let mut deepest = 0;
    while let Some((value, outer)) = stack.pop() {
        let level = outer + 1;
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, level))),
            Value::Object(members) => stack.extend(members.values().map(|member| (member, level))),
            _ => continue,
        }
        deepest = deepest.max(level);
        if deepest > stop_above {
            break;
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canonical(text: &str) -> String {
        canonical_json(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn the_rfc_sample_of_section_3_2_2_canonicalizes_as_published() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let expected = concat!(
            r#"{"literals":[null,true,false],"#,
            r#""numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"#,
            r#""string":"€$\u000f\nA'B\"\\\\\"/"}"#,
        );
        assert_eq!(canonical(input), expected);
    }

    #[test]
    fn members_sort_by_utf16_code_units_as_in_section_3_2_3() {
        let input = r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"}"#;
        // U+1F600 is the surrogate pair D83D DE00, which sorts before U+FB33 in UTF-16 although
        // its UTF-8 bytes sort after.
        let expected = concat!(
            r#"{"\r":"Carriage Return","1":"One","#,
            "\"\u{80}\":\"Control\",",
            r#""ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","#,
            r#""😀":"Emoji: Grinning Face","#,
            "\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        );
        assert_eq!(canonical(input), expected);
    }

    #[test]
    fn numbers_follow_the_ieee_754_table_of_appendix_b() {
        let table: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in table {
            let value = json!(f64::from_bits(*bits));
            assert_eq!(canonical_json(&value), *expected, "{bits:016x}");
        }
    }

    #[test]
    fn number_spellings_of_one_double_canonicalize_alike() {
        let table = [
            ("1.0", "1"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1e21", "1e+21"),
            ("1E+21", "1e+21"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("100", "100"),
            ("12e1", "120"),
            ("4.50", "4.5"),
            ("9007199254740993", "9007199254740992"),
            ("18446744073709551615", "18446744073709552000"),
            ("-9223372036854775808", "-9223372036854776000"),
        ];
        for (input, expected) in table {
            assert_eq!(canonical(input), expected, "{input}");
        }
    }

    #[test]
    fn strings_escape_only_what_json_requires() {
        let table = [
            (r#""\u00e9""#, "\"é\""),
            (r#""\/""#, "\"/\""),
            (r#""\u007f""#, "\"\u{7f}\""),
            (r#""\u2028""#, "\"\u{2028}\""),
            (r#""\u001F\u0000""#, r#""\u001f\u0000""#),
            (r#""\b\f\n\r\t""#, r#""\b\f\n\r\t""#),
            (r#""\ud83d\ude00""#, "\"😀\""),
        ];
        for (input, expected) in table {
            assert_eq!(canonical(input), expected, "{input}");
        }
    }

    #[test]
    fn whitespace_and_member_order_vanish_at_every_level() {
        let a = canonical(r#"{ "b" : [ 1 , { "y" : 2 , "x" : 1 } ] , "a" : null }"#);
        let b = canonical(r#"{"a":null,"b":[1.0,{"x":1,"y":2e0}]}"#);
        assert_eq!(a, r#"{"a":null,"b":[1,{"x":1,"y":2}]}"#);
        assert_eq!(a, b);
    }

    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |inner, _| json!([inner]))
    }

    #[test]
    fn depth_counts_arrays_and_objects_not_scalars() {
        let table = [
            (json!("x"), 0),
            (json!([]), 1),
            (json!({}), 1),
            (json!({"a": 1, "b": [2]}), 2),
            (json!([{"a": {"b": []}}, 1]), 4),
            (nested(64), 64),
            (nested(500), 500),
        ];
        for (value, expected) in table {
            assert_eq!(depth(&value), expected, "{value}");
        }
    }

    #[test]
    fn the_depth_check_lets_64_levels_through_and_refuses_65() {
        assert_eq!(check_depth(&nested(MAX_DEPTH), MAX_DEPTH), Ok(()));
        assert_eq!(
            check_depth(&nested(MAX_DEPTH + 1), MAX_DEPTH),
            Err(TooDeep { max: 64 })
        );
        let deep_in_a_wide_object = json!({"a": 1, "b": [1, 2, nested(70)], "c": {}});
        assert!(check_depth(&deep_in_a_wide_object, MAX_DEPTH).is_err());
    }
}
