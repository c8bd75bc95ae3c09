//! Idempotency keys and tool names: the two texts that identify an operation, checked once at
//! the edge (parse, don't validate).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use super::checked::checked_text;

/// The longest idempotency key, in characters (and bytes: keys are ASCII).
pub const MAX_KEY_LEN: usize = 255;

/// The longest tool name, in characters.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Why a text is not an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidIdempotencyKey {
    /// The key is the empty string.
    #[error("an idempotency key must not be empty")]
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`].
    #[error("an idempotency key must be at most 255 characters, not {length}")]
    TooLong {
        /// Its length in characters.
        length: usize,
    },
    /// The key holds a control character or a character outside ASCII.
    #[error(
        "an idempotency key must be printable ASCII (space to '~'); character {position} is not"
    )]
    NotPrintable {
        /// The position (from 1) of the first refused character.
        position: usize,
    },
}

impl InvalidIdempotencyKey {
    /// The API's error code.
    pub fn code(&self) -> &'static str {
        "invalid_idempotency_key"
    }
}

/// Whether `c` may appear in an idempotency key: printable ASCII, 0x20 to 0x7E.
pub(super) fn is_key_char(c: char) -> bool {
    matches!(c, ' '..='~')
}

fn check_key(value: &str) -> Result<(), InvalidIdempotencyKey> {
    if value.is_empty() {
        return Err(InvalidIdempotencyKey::Empty);
    }
    if let Some(index) = value.chars().position(|c| !is_key_char(c)) {
        return Err(InvalidIdempotencyKey::NotPrintable {
            position: index + 1,
        });
    }
    // Only ASCII is left, so bytes are characters.
    if value.len() > MAX_KEY_LEN {
        return Err(InvalidIdempotencyKey::TooLong {
            length: value.len(),
        });
    }
    Ok(())
}

checked_text!(
    /// The identity of one intended action within a namespace: 1 to 255 printable ASCII
    /// characters (0x20 to 0x7E), given by the caller or derived by [`super::KeyChoice`].
    IdempotencyKey,
    InvalidIdempotencyKey,
    check_key
);

/// A text that is not a tool name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tool name must be 1 to 128 characters of letters, digits, '_', '.', ':' and '-'")]
pub struct InvalidToolName;

impl InvalidToolName {
    /// The API's error code.
    pub fn code(&self) -> &'static str {
        "invalid_tool_name"
    }
}

fn check_tool_name(value: &str) -> Result<(), InvalidToolName> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
    if (1..=MAX_TOOL_NAME_LEN).contains(&value.len()) && value.chars().all(allowed) {
        Ok(())
    } else {
        Err(InvalidToolName)
    }
}

checked_text!(
    /// The name of a tool an agent calls: 1 to 128 characters of `[A-Za-z0-9_.:-]`.
    ToolName,
    InvalidToolName,
    check_tool_name
);

/// Where an operation's key came from (the `key_source` of an Op).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// The `Idempotency-Key` header.
    Header,
    /// The body's `key`.
    Body,
    /// The body's `business_key`, or the tool's `key_fields`.
    Business,
    /// Derived from `run_id`, `step`, the tool and its arguments.
    Derived,
}

impl KeySource {
    /// Every source, in the order the API tries them.
    pub const ALL: [KeySource; 4] = [Self::Header, Self::Body, Self::Business, Self::Derived];

    /// The source's name as it appears in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::Body => "body",
            Self::Business => "business",
            Self::Derived => "derived",
        }
    }
}

/// A key source name that is not one of `header`, `body`, `business`, `derived`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key_source must be one of header, body, business, derived")]
pub struct KeySourceParseError;

impl FromStr for KeySource {
    type Err = KeySourceParseError;
    fn from_str(value: &str) -> Result<Self, KeySourceParseError> {
        Self::ALL
            .into_iter()
            .find(|source| source.as_str() == value)
            .ok_or(KeySourceParseError)
    }
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_1_to_255_printable_ascii_characters() {
        use InvalidIdempotencyKey::*;
        let longest = "k".repeat(255);
        let too_long = "k".repeat(256);
        let table: &[(&str, Result<(), InvalidIdempotencyKey>)] = &[
            ("a", Ok(())),
            ("8e03978e-40d5-43e8-bc93-6894a57f9324", Ok(())),
            ("refund:order-1234", Ok(())),
            ("with space and ~!@#$%^&*()[]{}\"'\\", Ok(())),
            (&longest, Ok(())),
            ("", Err(Empty)),
            (&too_long, Err(TooLong { length: 256 })),
            ("tab\there", Err(NotPrintable { position: 4 })),
            ("new\nline", Err(NotPrintable { position: 4 })),
            ("nul\0", Err(NotPrintable { position: 4 })),
            ("del\x7f", Err(NotPrintable { position: 4 })),
            ("café", Err(NotPrintable { position: 4 })),
            ("😀", Err(NotPrintable { position: 1 })),
        ];
        for (input, expected) in table {
            let actual =
                IdempotencyKey::try_from(*input).map(|key| assert_eq!(key.as_str(), *input));
            assert_eq!(&actual, expected, "{input:?}");
        }
    }

    #[test]
    fn tool_names_are_1_to_128_characters_of_a_small_alphabet() {
        let longest = "t".repeat(128);
        let too_long = "t".repeat(129);
        let table: &[(&str, bool)] = &[
            ("refund", true),
            ("stripe.refunds:create-v2_beta", true),
            ("A9", true),
            (&longest, true),
            (&too_long, false),
            ("", false),
            ("has space", false),
            ("slash/y", false),
            ("émoji", false),
            ("at@", false),
        ];
        for (input, ok) in table {
            assert_eq!(ToolName::try_from(*input).is_ok(), *ok, "{input:?}");
        }
    }

    #[test]
    fn keys_and_tool_names_deserialize_through_the_same_check() {
        let key: IdempotencyKey = serde_json::from_str("\"abc\"").unwrap();
        assert_eq!(key.to_string(), "abc");
        assert!(serde_json::from_str::<IdempotencyKey>("\"\"").is_err());
        assert!(serde_json::from_str::<ToolName>("\"bad name\"").is_err());
        assert_eq!(serde_json::to_string(&key).unwrap(), "\"abc\"");
    }

    #[test]
    fn key_sources_round_trip_through_their_names() {
        for source in KeySource::ALL {
            assert_eq!(source.as_str().parse::<KeySource>(), Ok(source));
            let json = serde_json::to_string(&source).unwrap();
            assert_eq!(json, format!("\"{source}\""));
        }
        assert_eq!("Header".parse::<KeySource>(), Err(KeySourceParseError));
    }
}
