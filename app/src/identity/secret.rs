//! Bearer secrets (API keys, session tokens): 32 random bytes shown once and stored only as
//! a SHA-256 digest. A high-entropy secret needs no slow hash, and the claim path must stay fast.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Every API key starts with this, so a leaked key is recognisable (secret scanners, logs).
pub const API_KEY_PREFIX: &str = "idem_";

/// The SHA-256 digest under which a secret is stored and looked up.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretHash(pub [u8; 32]);

impl SecretHash {
    /// The digest of a secret as presented by a caller.
    pub fn of(secret: &str) -> Self {
        Self(Sha256::digest(secret.as_bytes()).into())
    }
}

/// 32 random bytes as 43 URL-safe characters: for tokens that are compared, never stored
/// in clear where a leak would matter (lease tokens, passwords to show once).
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A newly created API key: the plaintext exists only in this value and the one response
/// (or CLI output) that shows it.
#[derive(Debug)]
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    /// A fresh random key, `idem_` followed by 43 URL-safe characters.
    pub fn generate() -> Self {
        Self(format!("{API_KEY_PREFIX}{}", random_token()))
    }

    /// The plaintext, to show once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is stored.
    pub fn hash(&self) -> SecretHash {
        SecretHash::of(&self.0)
    }

    /// The first characters, kept in clear so people can tell keys apart.
    pub fn display_prefix(&self) -> String {
        self.0.chars().take(API_KEY_PREFIX.len() + 6).collect()
    }
}

/// A session token, carried in the session cookie.
#[derive(Debug, Clone)]
pub struct SessionToken(String);

impl SessionToken {
    /// A fresh random token.
    pub fn generate() -> Self {
        Self(random_token())
    }

    /// The token as sent to the browser.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is stored.
    pub fn hash(&self) -> SecretHash {
        SecretHash::of(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_are_prefixed_random_and_hashed() {
        let a = ApiKeySecret::generate();
        let b = ApiKeySecret::generate();
        assert!(a.expose().starts_with("idem_"));
        assert_eq!(a.expose().len(), 5 + 43);
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.hash(), SecretHash::of(a.expose()));
        assert_ne!(a.hash(), b.hash());
        assert!(a.expose().starts_with(&a.display_prefix()));
    }

    #[test]
    fn the_digest_is_sha256() {
        // SHA-256("abc") from FIPS 180-2.
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let actual: String = SecretHash::of("abc")
            .0
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(actual, expected);
    }
}
