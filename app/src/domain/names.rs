//! Names that arrive from outside and are checked once, at the edge (parse, don't validate).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a name was refused; the message is written for the caller who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be 1 to {max} characters of {allowed}")]
pub struct NameError {
    what: &'static str,
    max: usize,
    allowed: &'static str,
}

fn check_name(
    value: &str,
    what: &'static str,
    max: usize,
    allowed: &'static str,
    is_allowed: fn(char) -> bool,
) -> Result<(), NameError> {
    let length_ok = (1..=max).contains(&value.chars().count());
    if length_ok && value.chars().all(is_allowed) {
        Ok(())
    } else {
        Err(NameError { what, max, allowed })
    }
}

macro_rules! checked_name {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:literal, $allowed:literal, $is_allowed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, NameError> {
                check_name(&value, $what, $max, $allowed, $is_allowed)?;
                Ok(Self(value))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = NameError;
            fn try_from(value: &str) -> Result<Self, NameError> {
                Self::try_from(value.to_owned())
            }
        }

        impl std::str::FromStr for $name {
            type Err = NameError;
            fn from_str(value: &str) -> Result<Self, NameError> {
                Self::try_from(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn is_username_char(c: char) -> bool {
    is_name_char(c) || c == '@'
}

checked_name!(
    /// A tenant of the ledger: every API key belongs to one, and every operation lives in the
    /// namespace of the key that created it.
    Namespace,
    "namespace",
    64,
    "letters, digits, '_', '-' and '.'",
    is_name_char
);

checked_name!(
    /// The login name of a person.
    Username,
    "username",
    64,
    "letters, digits, '_', '-', '.' and '@'",
    is_username_char
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_accept_plain_names_and_refuse_the_rest() {
        let cases: &[(&str, bool)] = &[
            ("support-bot", true),
            ("a", true),
            ("team.payments_2", true),
            (&"n".repeat(64), true),
            (&"n".repeat(65), false),
            ("", false),
            ("has space", false),
            ("slash/y", false),
            ("tab\t", false),
            ("ünïcode", false),
        ];
        for (input, ok) in cases {
            assert_eq!(Namespace::try_from(*input).is_ok(), *ok, "{input:?}");
        }
    }

    #[test]
    fn usernames_also_accept_email_like_names() {
        assert!(Username::try_from("ada@example.org").is_ok());
        assert!(Username::try_from("ada lovelace").is_err());
        assert!(Namespace::try_from("ada@example.org").is_err());
    }

    #[test]
    fn names_deserialize_through_the_same_check() {
        let ok: Result<Namespace, _> = serde_json::from_str("\"billing\"");
        assert_eq!(ok.unwrap().as_str(), "billing");
        let bad: Result<Namespace, _> = serde_json::from_str("\"no way\"");
        assert!(bad.is_err());
    }
}
