//! The identity service: logins, sessions, API keys and the first admin.

use chrono::{DateTime, Duration, Utc};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

use super::{
    ApiKeySecret, IdentityStore, LoginThrottle, NewApiKey, NewSession, NewUser, PasswordHasher,
    SecretHash, SessionToken,
};
use crate::domain::{ApiKeyInfo, Namespace, Role, UserInfo, Username};
use crate::read_cache::ReadCache;
use crate::store_error::StoreError;

mod people;

impl From<super::password::Busy> for IdentityError {
    fn from(_: super::password::Busy) -> Self {
        IdentityError::Busy
    }
}

/// What can go wrong in identity operations, as the adapters need to tell callers.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Too many failed sign-ins for this username from this address, or from this address.
    /// `refused` counts the attempts refused in this window so far, this one included.
    #[error("too many failed sign-ins; try again in {retry_after_seconds} s")]
    Throttled {
        retry_after_seconds: u64,
        refused: u64,
    },
    /// Too many passwords are being checked at once; nothing was checked.
    #[error("too many sign-ins at once; try again in a moment")]
    Busy,
    /// Unknown user or wrong password: deliberately indistinguishable.
    #[error("wrong username or password")]
    InvalidCredentials,
    /// The right password of a disabled person. Answered exactly as
    /// [`IdentityError::InvalidCredentials`]; only the audit tells them apart.
    #[error("wrong username or password")]
    AccountDisabled,
    /// The current password given to change one's own was wrong.
    #[error("the current password is wrong")]
    WrongCurrentPassword,
    /// A user with this name already exists.
    #[error("a user named {0} already exists")]
    UsernameTaken(Username),
    /// No such user.
    #[error("no user named {0}")]
    UnknownUser(Username),
    /// A password that does not meet the policy.
    #[error("password must be at least {min} characters")]
    WeakPassword { min: usize },
    /// API key name too long or not printable.
    #[error("key name must be at most 128 printable characters")]
    BadKeyName,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An agent, authenticated by an API key of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub key_id: Uuid,
    pub key_name: String,
    pub namespace: Namespace,
}

/// The shortest password the default policy accepts.
pub const MIN_PASSWORD_LENGTH: usize = 8;

/// Tunables of identity.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    /// How long a session lasts from login.
    pub session_lifetime: Duration,
    /// A session unused for this long is over.
    pub session_idle_timeout: Duration,
    /// The shortest password accepted.
    pub min_password_length: usize,
    /// `last_used_at` of a key is written at most this often, to keep the agent path read-only.
    pub key_touch_interval: Duration,
    /// How long an API key read from the database is reused (see [`ReadCache`]).
    pub key_cache_max_age: std::time::Duration,
}

impl Default for IdentityPolicy {
    fn default() -> Self {
        Self {
            session_lifetime: Duration::hours(12),
            session_idle_timeout: Duration::minutes(30),
            min_password_length: MIN_PASSWORD_LENGTH,
            key_touch_interval: Duration::seconds(60),
            key_cache_max_age: std::time::Duration::from_secs(1),
        }
    }
}

/// Logins, sessions and API keys over an [`IdentityStore`]. Cheap to clone.
#[derive(Clone)]
pub struct Identity {
    store: Arc<dyn IdentityStore>,
    hasher: PasswordHasher,
    throttle: Arc<LoginThrottle>,
    /// API keys by hash, as last read: every agent request needs its key.
    keys: Arc<ReadCache<SecretHash, ApiKeyInfo>>,
    policy: IdentityPolicy,
}

/// At most this many API keys are kept in memory (only keys that exist are kept).
const KEY_CACHE_CAPACITY: usize = 10_000;

impl Identity {
    /// The service over a store.
    pub fn new(store: Arc<dyn IdentityStore>, policy: IdentityPolicy) -> Self {
        Self {
            store,
            hasher: PasswordHasher::new(),
            throttle: Arc::default(),
            keys: Arc::new(ReadCache::new(policy.key_cache_max_age, KEY_CACHE_CAPACITY)),
            policy,
        }
    }

    /// The session lifetime, for the cookie's `Max-Age`.
    pub fn session_lifetime(&self) -> Duration {
        self.policy.session_lifetime
    }

    /// Checks the password and opens a session. `address` is the caller's, for throttling.
    #[tracing::instrument(skip_all, fields(username = ?username))]
    pub async fn login(
        &self,
        username: &str,
        password: &str,
        address: Option<IpAddr>,
    ) -> Result<(UserInfo, SessionToken), IdentityError> {
        // Counted before the password is hashed: a guess pays for its place first.
        let reservation = self
            .throttle
            .attempt(username, address, Instant::now())
            .map_err(|refusal| IdentityError::Throttled {
                retry_after_seconds: refusal.retry_after.as_secs().max(1),
                refused: refusal.refused,
            })?;
        let result = self.check_credentials(username, password).await;
        match &result {
            Err(IdentityError::InvalidCredentials | IdentityError::AccountDisabled) => {}
            outcome => self.throttle.refund(reservation, outcome.is_ok()),
        }
        result
    }

    async fn check_credentials(
        &self,
        username: &str,
        password: &str,
    ) -> Result<(UserInfo, SessionToken), IdentityError> {
        // A malformed name cannot exist, but it still pays for a hash so timing tells nothing.
        let stored = match Username::try_from(username) {
            Ok(name) => self.store.user_by_username(&name).await?,
            Err(_) => None,
        };
        let hash = stored.as_ref().map(|user| user.password_hash.clone());
        if !self.hasher.verify(password.to_owned(), hash).await? {
            return Err(IdentityError::InvalidCredentials);
        }
        let user = stored
            .expect("a verified password belongs to a stored user")
            .info;
        if user.disabled {
            return Err(IdentityError::AccountDisabled);
        }
        let token = SessionToken::generate();
        let now = Utc::now();
        self.store
            .insert_session(NewSession {
                token_hash: token.hash(),
                user_id: user.id,
                created_at: now,
                expires_at: now + self.policy.session_lifetime,
            })
            .await?;
        Ok((user, token))
    }

    /// Ends the session of this token, if any.
    pub async fn logout(&self, token: &str) -> Result<(), IdentityError> {
        Ok(self.store.delete_session(&SecretHash::of(token)).await?)
    }

    /// The person behind a session token, if the session is live. A session found over (too
    /// old or idle too long) is deleted; a live one has its use recorded, at most once per
    /// [`Self::session_touch_interval`], so reading pages does not write on every request.
    pub async fn person_for_session(&self, token: &str) -> Result<Option<UserInfo>, IdentityError> {
        let hash = SecretHash::of(token);
        let Some(session) = self.store.session(&hash).await? else {
            return Ok(None);
        };
        let now = Utc::now();
        // Disabling deletes the sessions too; this holds should one be opened meanwhile.
        if !session.is_live(now, self.policy.session_idle_timeout) || session.user.disabled {
            self.store.delete_session(&hash).await?;
            return Ok(None);
        }
        if needs_touch(
            Some(session.last_used_at),
            now,
            self.session_touch_interval(),
        ) {
            self.store.touch_session(&hash, now).await?;
        }
        Ok(Some(session.user))
    }

    /// Whether the session is still live (not ended, idle past its timeout, expired, or of a
    /// disabled person), without counting this as a use: a long-lived stream asks this, and
    /// must not keep an unattended session alive.
    pub async fn session_is_live(&self, token: &str) -> Result<bool, IdentityError> {
        let hash = SecretHash::of(token);
        let Some(session) = self.store.session(&hash).await? else {
            return Ok(false);
        };
        let live = session.is_live(Utc::now(), self.policy.session_idle_timeout);
        Ok(live && !session.user.disabled)
    }

    /// How often a session's last use is written: like API keys, about once a minute, but
    /// often enough that a short idle timeout cannot end a session in steady use (the
    /// recorded use lags the real one by at most a quarter of the timeout).
    fn session_touch_interval(&self) -> Duration {
        self.policy
            .key_touch_interval
            .min(self.policy.session_idle_timeout / 4)
    }

    /// The agent behind an API key, if the key exists and is not revoked.
    pub async fn agent_for_key(&self, key: &str) -> Result<Option<Agent>, IdentityError> {
        let hash = SecretHash::of(key);
        let Some(mut info) = self.api_key(&hash).await? else {
            return Ok(None);
        };
        if info.revoked_at.is_some() {
            return Ok(None);
        }
        let now = Utc::now();
        if needs_touch(info.last_used_at, now, self.policy.key_touch_interval) {
            let ticket = self.keys.ticket();
            self.store.touch_api_key(info.id, now).await?;
            info.last_used_at = Some(now);
            self.keys.fill(ticket, hash, info.clone());
        }
        Ok(Some(Agent {
            key_id: info.id,
            key_name: info.name,
            namespace: info.namespace,
        }))
    }

    /// The key stored under `hash`, from the cache when it was read recently.
    async fn api_key(&self, hash: &SecretHash) -> Result<Option<ApiKeyInfo>, StoreError> {
        if let Some(info) = self.keys.get(hash) {
            return Ok(Some(info));
        }
        let ticket = self.keys.ticket();
        let info = self.store.api_key_by_hash(hash).await?;
        if let Some(info) = &info {
            self.keys.fill(ticket, hash.clone(), info.clone());
        }
        Ok(info)
    }

    /// Creates a person.
    #[tracing::instrument(skip_all, fields(username = %username, role = %role))]
    pub async fn create_user(
        &self,
        username: Username,
        role: Role,
        password: &str,
    ) -> Result<UserInfo, IdentityError> {
        self.insert_user(username, role, password, false).await
    }

    /// Creates a person; with `must_change_password`, their first act must be choosing a
    /// new password.
    async fn insert_user(
        &self,
        username: Username,
        role: Role,
        password: &str,
        must_change_password: bool,
    ) -> Result<UserInfo, IdentityError> {
        self.check_password(password)?;
        let info = UserInfo {
            id: Uuid::now_v7(),
            username,
            role,
            created_at: Utc::now(),
            disabled: false,
            must_change_password,
        };
        let password_hash = self.hasher.hash(password.to_owned()).await;
        let new = NewUser {
            id: info.id,
            username: info.username.clone(),
            role,
            password_hash,
            created_at: info.created_at,
            must_change_password,
        };
        match self.store.insert_user(new).await {
            Ok(()) => Ok(info),
            Err(StoreError::Conflict) => Err(IdentityError::UsernameTaken(info.username)),
            Err(other) => Err(other.into()),
        }
    }

    /// Every person.
    pub async fn list_users(&self) -> Result<Vec<UserInfo>, IdentityError> {
        Ok(self.store.list_users().await?)
    }

    /// Sets a new password and signs the user out everywhere.
    #[tracing::instrument(skip_all, fields(username = %username))]
    pub async fn set_password(
        &self,
        username: &Username,
        password: &str,
    ) -> Result<(), IdentityError> {
        self.check_password(password)?;
        let hash = self.hasher.hash(password.to_owned()).await;
        if self.store.set_password(username, hash).await? {
            Ok(())
        } else {
            Err(IdentityError::UnknownUser(username.clone()))
        }
    }

    /// On a fresh install, creates `admin` with a random password and returns that password
    /// (to be shown once). Does nothing when any user exists.
    pub async fn ensure_first_admin(&self) -> Result<Option<String>, IdentityError> {
        if self.store.count_users().await? > 0 {
            return Ok(None);
        }
        let password = SessionToken::generate()
            .expose()
            .chars()
            .take(24)
            .collect::<String>();
        let admin = Username::try_from("admin").expect("'admin' is a valid username");
        // The password was printed: whoever signs in with it first chooses their own.
        match self.insert_user(admin, Role::Admin, &password, true).await {
            Ok(_) => Ok(Some(password)),
            // Another process bootstrapped at the same moment: theirs stands.
            Err(IdentityError::UsernameTaken(_)) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Creates an API key for a namespace; the returned secret is the only copy of the key.
    #[tracing::instrument(skip_all, fields(namespace = %namespace))]
    pub async fn create_api_key(
        &self,
        namespace: Namespace,
        name: Option<String>,
    ) -> Result<(ApiKeyInfo, ApiKeySecret), IdentityError> {
        let name = name.unwrap_or_default();
        if name.chars().count() > 128 || name.chars().any(char::is_control) {
            return Err(IdentityError::BadKeyName);
        }
        let secret = ApiKeySecret::generate();
        let info = ApiKeyInfo {
            id: Uuid::now_v7(),
            namespace,
            name,
            prefix: secret.display_prefix(),
            created_at: Utc::now(),
            last_used_at: None,
            revoked_at: None,
        };
        self.store
            .insert_api_key(NewApiKey {
                info: info.clone(),
                key_hash: secret.hash(),
            })
            .await?;
        Ok((info, secret))
    }

    /// Every API key, newest first.
    pub async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, IdentityError> {
        Ok(self.store.list_api_keys().await?)
    }

    /// Revokes a key; returns whether it exists. Revoking twice is harmless.
    pub async fn revoke_api_key(&self, id: Uuid) -> Result<bool, IdentityError> {
        let revoked = self.store.revoke_api_key(id, Utc::now()).await;
        // Keys are cached by hash, not id; revocations are rare enough to forget them all.
        self.keys.invalidate_all();
        Ok(revoked?)
    }

    fn check_password(&self, password: &str) -> Result<(), IdentityError> {
        let min = self.policy.min_password_length;
        if password.chars().count() < min {
            return Err(IdentityError::WeakPassword { min });
        }
        Ok(())
    }
}

fn needs_touch(
    last_used_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    interval: Duration,
) -> bool {
    last_used_at.is_none_or(|last| now - last >= interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_use_is_written_at_most_once_per_interval() {
        let now = Utc::now();
        let minute = Duration::seconds(60);
        assert!(needs_touch(None, now, minute));
        assert!(needs_touch(Some(now - Duration::seconds(61)), now, minute));
        assert!(!needs_touch(Some(now - Duration::seconds(5)), now, minute));
    }
}
