//! Which idempotency key a claim uses, and how idem makes one when the caller gave none.
//!
//! # Precedence (first match wins)
//!
//! 1. the `Idempotency-Key` header; a body `key` that differs from it is an error
//!    (`conflicting_idempotency_keys`);
//! 2. the body's `key`;
//! 3. the body's `business_key`, used as it is;
//! 4. the tool's `key_fields` (a business key, below);
//! 5. a key derived from `run_id` and `step` (below); without both, `missing_idempotency_key`.
//!    An empty `run_id` counts as none.
//!
//! Given keys must be valid [`IdempotencyKey`]s (`invalid_idempotency_key`); made ones always are.
//!
//! # Business key from `key_fields`
//!
//! ```text
//! fields = JCS({ path: args at path, for each path in key_fields })
//! key    = tool + ":" + fields                               if that is ≤ 255 printable ASCII
//!                                                            and no field holds a secret
//!        = tool + ":sha256:" + lowercase_hex(SHA-256(fields)) otherwise
//! ```
//!
//! A field holds a secret when redaction (the default rules and the tool's `redact_fields`)
//! would change what is at its path: a key is stored and shown as it is, so a card number or
//! a password must never be readable in it.
//!
//! Each path is a dotted path through objects ([`super::paths`]) and is used, as written, as the
//! member name. A path that reaches no value is an error (`missing_key_field`); `null` is a value.
//! Example: tool `refund`, `key_fields: ["order_id"]`, args
//! `{"order_id": "1234", "amount_cents": 500}` → `refund:{"order_id":"1234"}`.
//!
//! # Derived key
//!
//! ```text
//! digest = lowercase_hex(SHA-256(tool + "\n" + JCS(args)))
//! key    = "run:" + run_id + ":step:" + step + ":" + digest
//!              if run_id is 1 to 128 printable ASCII characters (0x20 to 0x7E)
//!        = "run-sha256:" + lowercase_hex(SHA-256(run_id)) + ":step:" + step + ":" + digest
//!              otherwise
//! ```
//!
//! `step` is written in decimal without leading zeros, SHA-256 reads UTF-8 bytes, and JCS is
//! RFC 8785 ([`super::canonical`]). The digest is the operation's [`Fingerprint`], so the args
//! are those left after removing the tool's `ignore_fields`: a field the tool ignores cannot
//! turn one intent into two keys. A key of the first form is at most 223 characters long, one
//! of the second at most 166. Example: run `run-42`, step 4, tool `refund`,
//! args `{"order_id": "1234", "amount_cents": 500}` →
//! `run:run-42:step:4:9ca7900e47b3ba1f46f9786f52c565a33b451e2fc6d6d0b2641a7f3434617c41`.

use serde_json::{Map, Value};

use super::canonical::canonical_json;
use super::fingerprint::sha256_hex;
use super::keys::{is_key_char, InvalidIdempotencyKey, MAX_KEY_LEN};
use super::redaction::redact;
use super::{paths, Fingerprint, IdempotencyKey, KeySource, ToolName, ToolPolicy};

/// The longest `run_id` that a derived key keeps as it is; longer ones are hashed.
pub const MAX_VERBATIM_RUN_ID_LEN: usize = 128;

/// Why no key could be chosen for a claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No key given, no `key_fields`, and not both `run_id` and `step`.
    #[error("give an Idempotency-Key header, a key, a business_key, or both run_id and step")]
    MissingIdempotencyKey,
    /// The header and the body's `key` differ.
    #[error("the Idempotency-Key header and the body's key differ")]
    ConflictingIdempotencyKeys,
    /// A given key is not a valid idempotency key.
    #[error("{}: {reason}", given_as(.origin))]
    InvalidIdempotencyKey {
        /// Where the refused key was given.
        origin: KeySource,
        /// What is wrong with it.
        reason: InvalidIdempotencyKey,
    },
    /// One of the tool's `key_fields` is not in the arguments.
    #[error("args has no {field:?}, which the tool's key_fields require")]
    MissingKeyField {
        /// The dotted path that reached nothing.
        field: String,
    },
}

impl KeyError {
    /// The API's error code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "missing_idempotency_key",
            Self::ConflictingIdempotencyKeys => "conflicting_idempotency_keys",
            Self::InvalidIdempotencyKey { .. } => "invalid_idempotency_key",
            Self::MissingKeyField { .. } => "missing_key_field",
        }
    }
}

fn given_as(origin: &KeySource) -> &'static str {
    match origin {
        KeySource::Header => "the Idempotency-Key header",
        KeySource::Body => "key",
        KeySource::Business | KeySource::Derived => "business_key",
    }
}

/// What a claim said about its key; [`KeyChoice::resolve`] picks the one to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyChoice<'a> {
    /// The `Idempotency-Key` header.
    pub header: Option<&'a str>,
    /// The body's `key`.
    pub key: Option<&'a str>,
    /// The body's `business_key`.
    pub business_key: Option<&'a str>,
    /// The body's `run_id`.
    pub run_id: Option<&'a str>,
    /// The body's `step`.
    pub step: Option<u64>,
}

impl KeyChoice<'_> {
    /// The key for calling `tool` with `args` under `policy`, and where it came from, following
    /// the precedence in the module documentation.
    pub fn resolve(
        &self,
        tool: &ToolName,
        args: &Value,
        policy: &ToolPolicy,
    ) -> Result<(IdempotencyKey, KeySource), KeyError> {
        let given = |text: &str, origin| {
            IdempotencyKey::try_from(text)
                .map(|key| (key, origin))
                .map_err(|reason| KeyError::InvalidIdempotencyKey { origin, reason })
        };
        let header = self
            .header
            .map(|h| given(h, KeySource::Header))
            .transpose()?;
        let body = self.key.map(|k| given(k, KeySource::Body)).transpose()?;
        if let (Some((header, _)), Some((body, _))) = (&header, &body) {
            if header != body {
                return Err(KeyError::ConflictingIdempotencyKeys);
            }
        }
        if let Some(chosen) = header.or(body) {
            return Ok(chosen);
        }
        if let Some(business) = self.business_key {
            return given(business, KeySource::Business);
        }
        if !policy.key_fields.is_empty() {
            let key =
                business_key_from_fields(tool, args, &policy.key_fields, &policy.redact_fields)?;
            return Ok((key, KeySource::Business));
        }
        match (self.run_id.filter(|id| !id.is_empty()), self.step) {
            (Some(run_id), Some(step)) => {
                let digest = Fingerprint::compute(tool, args, &policy.ignore_fields);
                Ok((derived(run_id, step, &digest), KeySource::Derived))
            }
            _ => Err(KeyError::MissingIdempotencyKey),
        }
    }
}

/// The business key of calling `tool` with `args`, identified by `key_fields` (see the module
/// documentation for the recipe).
pub fn business_key_from_fields(
    tool: &ToolName,
    args: &Value,
    key_fields: &[String],
    redact_fields: &[String],
) -> Result<IdempotencyKey, KeyError> {
    let redacted = redact(args, redact_fields);
    let mut fields = Map::new();
    let mut holds_a_secret = false;
    for path in key_fields {
        let value = paths::get(args, path).ok_or_else(|| KeyError::MissingKeyField {
            field: path.clone(),
        })?;
        holds_a_secret |= paths::get(&redacted, path) != Some(value);
        fields.insert(path.clone(), value.clone());
    }
    let fields = canonical_json(&Value::Object(fields));
    let readable = format!("{tool}:{fields}");
    let key =
        if !holds_a_secret && readable.len() <= MAX_KEY_LEN && readable.chars().all(is_key_char) {
            readable
        } else {
            format!("{tool}:sha256:{}", sha256_hex(&fields))
        };
    Ok(made(key))
}

/// The key derived for calling `tool` with `args` at `step` of run `run_id`, with no ignored
/// fields (see the module documentation for the recipe).
pub fn derive_key(run_id: &str, step: u64, tool: &ToolName, args: &Value) -> IdempotencyKey {
    derived(run_id, step, &Fingerprint::compute(tool, args, &[]))
}

fn derived(run_id: &str, step: u64, digest: &Fingerprint) -> IdempotencyKey {
    let verbatim =
        (1..=MAX_VERBATIM_RUN_ID_LEN).contains(&run_id.len()) && run_id.chars().all(is_key_char);
    made(if verbatim {
        format!("run:{run_id}:step:{step}:{digest}")
    } else {
        format!("run-sha256:{}:step:{step}:{digest}", sha256_hex(run_id))
    })
}

/// A key that idem made; the recipes above only ever produce valid ones.
fn made(key: String) -> IdempotencyKey {
    IdempotencyKey::try_from(key).expect("idem's key recipes yield 1 to 255 printable ASCII")
}

#[cfg(test)]
mod tests;
