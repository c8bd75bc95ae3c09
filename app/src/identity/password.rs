//! Password hashing with argon2id at OWASP's recommended minimum (19 MiB, 2 passes, 1 lane).

use argon2::password_hash::{rand_core::OsRng, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Params, PasswordHasher as _, PasswordVerifier as _, Version};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long a sign-in waits for a turn to have its password checked before it is refused.
const TURN_WAIT: Duration = Duration::from_secs(2);

/// Hashes and verifies passwords. Cheap to clone; the work runs on the blocking pool so a
/// burst of logins never stalls the async runtime, and at most twice as many checks run at
/// once as there are cores (each holds 19 MiB), so a flood of guesses costs bounded memory.
#[derive(Clone)]
pub struct PasswordHasher {
    argon2: Arc<Argon2<'static>>,
    turns: Arc<Semaphore>,
    /// Verified against when the user does not exist, so that an unknown username costs the
    /// same time as a wrong password and the answer reveals nothing.
    decoy_hash: Arc<str>,
}

impl PasswordHasher {
    /// OWASP parameters: m = 19 MiB, t = 2, p = 1.
    pub fn new() -> Self {
        let params =
            Params::new(19 * 1024, 2, 1, None).expect("static argon2 parameters are valid");
        let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
        let decoy_hash = hash_with(&argon2, "decoy password that matches nothing")
            .expect("hashing a static password succeeds");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            argon2: Arc::new(argon2),
            turns: Arc::new(Semaphore::new(2 * cores)),
            decoy_hash: decoy_hash.into(),
        }
    }

    /// The PHC string of a freshly salted hash.
    pub async fn hash(&self, password: String) -> String {
        let argon2 = self.argon2.clone();
        tokio::task::spawn_blocking(move || hash_with(&argon2, &password))
            .await
            .expect("password hashing does not panic")
            .expect("argon2 hashing with valid parameters succeeds")
    }

    /// Whether the password matches the stored hash; with `None` it checks a decoy and
    /// answers `false` after the same amount of work. `Busy` when no turn came free in time.
    pub async fn verify(&self, password: String, stored: Option<String>) -> Result<bool, Busy> {
        let _turn = tokio::time::timeout(TURN_WAIT, self.turns.acquire())
            .await
            .map_err(|_| Busy)?
            .map_err(|_| Busy)?;
        let argon2 = self.argon2.clone();
        let exists = stored.is_some();
        let stored = stored.unwrap_or_else(|| self.decoy_hash.to_string());
        let matches = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&stored)
                .map(|parsed| argon2.verify_password(password.as_bytes(), &parsed).is_ok())
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        Ok(exists && matches)
    }
}

/// Every turn to check a password is taken, and none came free in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many passwords are being checked at once")]
pub struct Busy;

impl Default for PasswordHasher {
    fn default() -> Self {
        Self::new()
    }
}

fn hash_with(argon2: &Argon2<'_>, password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::generate(&mut OsRng);
    Ok(argon2
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_its_password_only() {
        let hasher = PasswordHasher::new();
        let hash = hasher.hash("correct horse".into()).await;
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(hasher
            .verify("correct horse".into(), Some(hash.clone()))
            .await
            .unwrap());
        assert!(!hasher
            .verify("wrong horse".into(), Some(hash))
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn an_unknown_user_never_verifies_not_even_with_the_decoy_password() {
        let hasher = PasswordHasher::new();
        let decoy = "decoy password that matches nothing".to_string();
        assert!(!hasher.verify(decoy, None).await.unwrap());
    }

    #[tokio::test]
    async fn a_check_waits_for_a_turn_and_is_refused_when_none_comes_free() {
        let hasher = PasswordHasher::new();
        let all = hasher.turns.available_permits() as u32;
        let taken = hasher.turns.clone().acquire_many_owned(all).await.unwrap();
        let refused = hasher.verify("guess".into(), None).await;
        assert_eq!(refused, Err(Busy));
        drop(taken);
        assert_eq!(hasher.verify("guess".into(), None).await, Ok(false));
    }
}
