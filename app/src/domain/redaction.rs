//! What the ledger never stores or shows of a tool's arguments.
//!
//! [`redact`] returns a copy of the arguments in which these values are the string
//! `"[redacted]"` (the fingerprint is computed before, from the arguments as sent):
//!
//! 1. at any depth, the value of a member whose name looks secret. Names are compared in lower
//!    case with `_` and `-` removed, so `apiKey`, `api-key` and `API_KEY` are all `apikey`; a
//!    name looks secret when it contains `password`, `secret`, `token`, `apikey`,
//!    `authorization`, `cvv` or `cvc`, or is `cardnumber` or `pan`, or is `number` in an object
//!    that is the value of a member named `card`. The whole value goes, whatever its type;
//! 2. any string that is a payment card number: 13 to 19 digits that pass the Luhn check,
//!    written together or in groups parted by single spaces or dashes (`4111 1111 1111 1111`,
//!    `4111-1111-1111-1111`). Only whole strings count: a number inside a sentence is not found;
//! 3. any JSON number that is a whole number of 13 to 19 digits passing the Luhn check, however
//!    it is spelled or signed (`4111111111111111`, `4111111111111111.0` as Python writes a
//!    float, `4.111111111111111e15`, `-4111111111111111`), since a card number sent as a
//!    number is no less a card number, and its digits would be stored as they are;
//! 4. the tool's `redact_fields`, dotted paths as in [`super::paths`].
//!
//! Rules 2 and 3 also catch one in ten other numbers of that length (a millisecond timestamp,
//! say); hiding those from view is the price of never storing a card number.

use serde_json::{Number, Value};

use super::paths;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

const SECRET_PARTS: [&str; 7] = [
    "password",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cvv",
    "cvc",
];
const SECRET_NAMES: [&str; 2] = ["cardnumber", "pan"];

/// A copy of `args` with secrets, card numbers and the `extra_paths` replaced by
/// [`REDACTED`] (see the module documentation for the rules).
pub fn redact(args: &Value, extra_paths: &[String]) -> Value {
    let mut redacted = args.clone();
    let replacement = Value::from(REDACTED);
    for path in extra_paths {
        paths::replace(&mut redacted, path, &replacement);
    }
    scrub(&mut redacted);
    redacted
}

/// A copy of what a tool answered for an operation (its result, or an error) redacted by the
/// rules its arguments were: rules 1–3 at any depth, and every path that is [`REDACTED`] in
/// `redacted_args` (the tool's `redact_fields`, or a rule) wherever that path appears in the
/// answer, since providers echo their input in shapes of their own (`{"args": {…}}`).
pub fn redact_answer(answer: &Value, redacted_args: &Value) -> Value {
    let mut redacted = answer.clone();
    let mut hidden = Vec::new();
    collect_redacted_paths(redacted_args, &mut Vec::new(), &mut hidden);
    if !hidden.is_empty() {
        replace_everywhere(&mut redacted, &hidden);
    }
    scrub(&mut redacted);
    redacted
}

/// The dotted paths of the members whose value is [`REDACTED`]; arrays are passed through, as
/// paths pass through them. Names holding a `.` cannot be addressed by a path and are skipped.
fn collect_redacted_paths<'a>(value: &'a Value, prefix: &mut Vec<&'a str>, out: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members.iter().filter(|(name, _)| !name.contains('.')) {
                prefix.push(name);
                if member.as_str() == Some(REDACTED) {
                    out.push(prefix.join("."));
                } else {
                    collect_redacted_paths(member, prefix, out);
                }
                prefix.pop();
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_redacted_paths(item, prefix, out)),
        _ => {}
    }
}

/// Replaces each path starting at `value` and at every value below it.
fn replace_everywhere(value: &mut Value, hidden: &[String]) {
    let replacement = Value::from(REDACTED);
    for path in hidden {
        paths::replace(value, path, &replacement);
    }
    match value {
        Value::Object(members) => members
            .values_mut()
            .for_each(|member| replace_everywhere(member, hidden)),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| replace_everywhere(item, hidden)),
        _ => {}
    }
}

fn scrub(value: &mut Value) {
    let hide = match value {
        Value::Object(members) => {
            for (name, member) in members.iter_mut() {
                let name = normalized(name);
                if looks_secret(&name) {
                    *member = REDACTED.into();
                    continue;
                }
                if name == "card" {
                    hide_card_number(member);
                }
                scrub(member);
            }
            false
        }
        Value::Array(items) => {
            items.iter_mut().for_each(scrub);
            false
        }
        Value::String(text) => is_card_number(text),
        Value::Number(number) => whole_number_digits(number).is_some_and(|d| is_card_number(&d)),
        Value::Null | Value::Bool(_) => false,
    };
    if hide {
        *value = REDACTED.into();
    }
}

/// The decimal digits of a number that is whole, without its sign, whatever its spelling.
/// Doubles only reach 20 digits from 1e19 on, beyond any card number, so larger ones are left.
fn whole_number_digits(number: &Number) -> Option<String> {
    if let Some(n) = number.as_u64() {
        return Some(n.to_string());
    }
    if let Some(n) = number.as_i64() {
        return Some(n.unsigned_abs().to_string());
    }
    let magnitude = number.as_f64()?.abs();
    (magnitude.fract() == 0.0 && magnitude < 1e19).then(|| format!("{magnitude:.0}"))
}

fn hide_card_number(card: &mut Value) {
    if let Value::Object(members) = card {
        for (name, member) in members.iter_mut() {
            if normalized(name) == "number" {
                *member = REDACTED.into();
            }
        }
    }
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn looks_secret(normalized_name: &str) -> bool {
    SECRET_PARTS
        .iter()
        .any(|part| normalized_name.contains(part))
        || SECRET_NAMES.contains(&normalized_name)
}

/// Whether `text` is 13 to 19 digits, with single spaces or dashes between them, that pass the
/// Luhn check.
pub fn is_card_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut digits = Vec::with_capacity(19);
    for (i, &byte) in bytes.iter().enumerate() {
        match byte {
            b'0'..=b'9' => digits.push(byte - b'0'),
            b' ' | b'-' => {
                let between_digits = i > 0
                    && bytes[i - 1].is_ascii_digit()
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
                if !between_digits {
                    return false;
                }
            }
            _ => return false,
        }
        if digits.len() > 19 {
            return false;
        }
    }
    digits.len() >= 13 && passes_luhn(&digits)
}

/// The Luhn check: doubling every second digit from the right, the digit sum is a multiple of 10.
fn passes_luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2 == 1, u32::from(d)) {
            (true, d) if d > 4 => 2 * d - 9,
            (true, d) => 2 * d,
            (false, d) => d,
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests;
