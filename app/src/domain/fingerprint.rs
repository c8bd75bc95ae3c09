//! The fingerprint of an intent: which tool, called with which arguments.
//!
//! `fingerprint = lowercase_hex(SHA-256(tool + "\n" + JCS(args without ignore_fields)))`, where
//! JCS is RFC 8785 (see [`super::canonical`]) and `ignore_fields` are the tool's dotted paths
//! (see [`super::paths`]). Key order, whitespace, number spelling (`1.0` and `1`) and string
//! escapes (`"\u00e9"` and `"é"`) therefore never change it. A key reused with another
//! fingerprint is refused, so the fingerprint is what binds a key (and an approval) to one set of
//! arguments.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

use super::canonical::canonical_json;
use super::checked::checked_text;
use super::keys::ToolName;
use super::paths;

/// Text that is not 64 lowercase hexadecimal digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a fingerprint is 64 lowercase hexadecimal digits (a SHA-256)")]
pub struct InvalidFingerprint;

fn check_fingerprint(value: &str) -> Result<(), InvalidFingerprint> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if value.len() == 64 && value.bytes().all(hex) {
        Ok(())
    } else {
        Err(InvalidFingerprint)
    }
}

checked_text!(
    /// SHA-256, in lowercase hex, of a tool name and its canonical arguments (see the module
    /// documentation for the exact recipe).
    Fingerprint,
    InvalidFingerprint,
    check_fingerprint
);

impl Fingerprint {
    /// The fingerprint of calling `tool` with `args`, leaving out the `ignore_fields` paths.
    pub fn compute(tool: &ToolName, args: &Value, ignore_fields: &[String]) -> Self {
        let mut kept = args.clone();
        for path in ignore_fields {
            paths::remove(&mut kept, path);
        }
        Self(sha256_hex(&tool_and_args(tool, &kept)))
    }
}

/// `tool + "\n" + JCS(args)`: the text that fingerprints and derived keys hash.
pub(super) fn tool_and_args(tool: &ToolName, args: &Value) -> String {
    format!("{tool}\n{}", canonical_json(args))
}

/// Lowercase hex SHA-256 of `text`'s UTF-8 bytes.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            // Writing into a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn fingerprint(tool: &str, args: &str, ignore: &[&str]) -> Fingerprint {
        let ignore: Vec<String> = ignore.iter().map(|path| path.to_string()).collect();
        let args = serde_json::from_str(args).unwrap();
        Fingerprint::compute(&ToolName::try_from(tool).unwrap(), &args, &ignore)
    }

    #[test]
    fn the_recipe_is_sha256_of_the_tool_a_newline_and_jcs() {
        // Computed once with `printf 'refund\n{"amount_cents":500,"order_id":"1234"}' | sha256sum`.
        let expected = "9ca7900e47b3ba1f46f9786f52c565a33b451e2fc6d6d0b2641a7f3434617c41";
        let actual = fingerprint("refund", r#"{"order_id":"1234","amount_cents":500}"#, &[]);
        assert_eq!(actual.as_str(), expected);
    }

    #[test]
    fn spellings_of_the_same_arguments_share_a_fingerprint() {
        let table = [
            (r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#),
            (
                r#"{"a":[1,2],"b":{"c":true}}"#,
                "{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { \"c\" : true } }",
            ),
            (r#"{"amount":1.0}"#, r#"{"amount":1}"#),
            (r#"{"amount":1e2}"#, r#"{"amount":100}"#),
            (r#"{"name":"\u00e9"}"#, r#"{"name":"é"}"#),
            (r#"{"n":-0.0}"#, r#"{"n":0}"#),
        ];
        for (a, b) in table {
            assert_eq!(
                fingerprint("refund", a, &[]),
                fingerprint("refund", b, &[]),
                "{a} vs {b}"
            );
        }
    }

    #[test]
    fn a_different_tool_or_argument_changes_the_fingerprint() {
        let args = r#"{"order_id":"1234","amount_cents":500}"#;
        let base = fingerprint("refund", args, &[]);
        assert_ne!(base, fingerprint("refund_v2", args, &[]));
        assert_ne!(
            base,
            fingerprint("refund", r#"{"order_id":"1234","amount_cents":501}"#, &[])
        );
        assert_ne!(
            base,
            fingerprint("refund", r#"{"order_id":1234,"amount_cents":500}"#, &[])
        );
    }

    #[test]
    fn ignored_fields_do_not_count_at_any_depth() {
        let ignore = ["reason", "meta.trace_id"];
        let a = r#"{"order_id":"1","reason":"asked nicely","meta":{"trace_id":"t1","v":1}}"#;
        let b = r#"{"order_id":"1","reason":"customer angry","meta":{"trace_id":"t2","v":1}}"#;
        let c = r#"{"order_id":"1","meta":{"v":1}}"#;
        assert_eq!(
            fingerprint("refund", a, &ignore),
            fingerprint("refund", b, &ignore)
        );
        assert_eq!(
            fingerprint("refund", a, &ignore),
            fingerprint("refund", c, &ignore)
        );
        assert_ne!(fingerprint("refund", a, &[]), fingerprint("refund", b, &[]));
    }

    #[test]
    fn fingerprints_parse_only_from_lowercase_sha256_hex() {
        let good = "0".repeat(64);
        let table = [
            (good.as_str(), true),
            (&"a".repeat(64), true),
            (&"A".repeat(64), false),
            (&"0".repeat(63), false),
            (&"0".repeat(65), false),
            (&"g".repeat(64), false),
            ("", false),
        ];
        for (input, ok) in table {
            assert_eq!(Fingerprint::try_from(input).is_ok(), ok, "{input:?}");
        }
    }

    /// Writes `value` as JSON text with every object's members in an order chosen by `seed`,
    /// and spaces after separators when `spaced`.
    fn shuffled_text(value: &Value, seed: u64, spaced: bool) -> String {
        let gap = if spaced { " " } else { "" };
        match value {
            Value::Array(items) => {
                let items: Vec<String> = items
                    .iter()
                    .map(|v| shuffled_text(v, seed, spaced))
                    .collect();
                format!("[{}]", items.join(&format!(",{gap}")))
            }
            Value::Object(members) => {
                let mut members: Vec<(&String, &Value)> = members.iter().collect();
                members.sort_by_key(|(name, _)| scramble(seed, name));
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(name, v)| {
                        format!("{}:{gap}{}", json!(name), shuffled_text(v, seed, spaced))
                    })
                    .collect();
                format!("{{{gap}{}{gap}}}", members.join(&format!(",{gap}")))
            }
            scalar => scalar.to_string(),
        }
    }

    /// A seeded hash of `name` (FNV-1a), so that each seed gives another member order.
    fn scramble(seed: u64, name: &str) -> u64 {
        name.bytes()
            .fold(seed ^ 0xcbf2_9ce4_8422_2325, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            })
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e12f64..1e12).prop_map(Value::from),
            "[a-zA-Zé€😀 \\n\"\\\\]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map("[a-z_é😀]{1,6}", inner, 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn reordering_members_never_changes_the_fingerprint(
            members in prop::collection::btree_map("[a-z_é😀]{1,6}", any_json(), 0..8),
            seed in any::<u64>(),
            spaced in any::<bool>(),
        ) {
            let tool = ToolName::try_from("refund").unwrap();
            let args = Value::Object(members.into_iter().collect());
            let text = shuffled_text(&args, seed, spaced);
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(
                Fingerprint::compute(&tool, &reparsed, &[]),
                Fingerprint::compute(&tool, &args, &[])
            );
        }

        /// `1`, `1.0`, `1e0`, `10e-1` and `0.1e1` are one number: a client's way of writing it
        /// never makes another intent.
        #[test]
        fn spelling_a_number_differently_never_changes_the_fingerprint(
            whole in -1_000_000_000i64..1_000_000_000,
            cents in 0u32..100,
            how in 0usize..5,
        ) {
            let tool = ToolName::try_from("refund").unwrap();
            let plain = format!("{whole}.{cents:02}");
            // The same value in hundredths, written without leading zeros.
            let sign = if whole < 0 { -1 } else { 1 };
            let hundredths = whole * 100 + sign * i64::from(cents);
            let spellings = [
                plain.clone(),
                format!("{plain}000"),
                format!("{hundredths}e-2"),
                format!("{}E-3", hundredths * 10),
                format!("{plain}e+0"),
            ];
            let args = |number: &str| -> Value {
                serde_json::from_str(&format!(r#"{{"amount": {number}, "order": "o-1"}}"#)).unwrap()
            };
            prop_assert_eq!(
                Fingerprint::compute(&tool, &args(&spellings[how]), &[]),
                Fingerprint::compute(&tool, &args(&plain), &[])
            );
            if cents == 0 {
                prop_assert_eq!(
                    Fingerprint::compute(&tool, &args(&whole.to_string()), &[]),
                    Fingerprint::compute(&tool, &args(&plain), &[])
                );
            }
        }
    }
}
