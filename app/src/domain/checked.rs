//! The shape shared by every text newtype of the ledger: checked once when built from a
//! `String`, `&str` or JSON, and plain text everywhere after that.

/// Declares a `String` newtype whose only way in is `check(&str) -> Result<(), Error>`.
///
/// Paths are spelled out in full so that a caller needs no imports for the macro to work.
macro_rules! checked_text {
    ($(#[$doc:meta])* $name:ident, $error:ty, $check:path) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize,
        )]
        #[cfg_attr(feature = "ssr", derive(::utoipa::ToSchema))]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $error;
            fn try_from(value: String) -> Result<Self, $error> {
                $check(&value)?;
                Ok(Self(value))
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $error;
            fn try_from(value: &str) -> Result<Self, $error> {
                $check(value)?;
                Ok(Self(value.to_owned()))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $error;
            fn from_str(value: &str) -> Result<Self, $error> {
                Self::try_from(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

pub(super) use checked_text;
