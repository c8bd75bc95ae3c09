//! The storage port for identity. Implemented once per database in the server crate and
//! checked by one conformance suite.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::{AccountChange, AccountChanged, SecretHash};
use crate::domain::{ApiKeyInfo, Role, UserInfo, Username};
use crate::store_error::StoreError;

/// A user to insert.
#[derive(Debug, Clone)]
pub struct NewUser {
    pub id: Uuid,
    pub username: Username,
    pub role: Role,
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
    /// Whether the person must choose a new password at their first sign-in.
    pub must_change_password: bool,
}

/// A user with the hash needed to check a password.
#[derive(Debug, Clone)]
pub struct StoredUser {
    pub info: UserInfo,
    pub password_hash: String,
}

/// A session to insert.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub token_hash: SecretHash,
    pub user_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A session as stored, with its user. Whether it is still live is the service's call
/// ([`StoredSession::is_live`]), so both databases share one rule.
#[derive(Debug, Clone)]
pub struct StoredSession {
    pub user: UserInfo,
    /// The absolute end, fixed at login.
    pub expires_at: DateTime<Utc>,
    /// The last recorded use (written at most about once a minute), or the login time.
    pub last_used_at: DateTime<Utc>,
}

impl StoredSession {
    /// Whether the session may still be used at `now`: before its absolute end, and used
    /// less than `idle_timeout` ago.
    pub fn is_live(&self, now: DateTime<Utc>, idle_timeout: Duration) -> bool {
        now < self.expires_at && now - self.last_used_at < idle_timeout
    }
}

/// An API key to insert.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub info: ApiKeyInfo,
    pub key_hash: SecretHash,
}

/// Users, sessions and API keys.
#[async_trait::async_trait]
pub trait IdentityStore: Send + Sync {
    /// How many users exist (to bootstrap the first admin).
    async fn count_users(&self) -> Result<u64, StoreError>;
    /// Inserts a user; `Conflict` when the username is taken.
    async fn insert_user(&self, user: NewUser) -> Result<(), StoreError>;
    /// The user with this username, with their password hash.
    async fn user_by_username(&self, username: &Username)
        -> Result<Option<StoredUser>, StoreError>;
    /// Every user, by username.
    async fn list_users(&self) -> Result<Vec<UserInfo>, StoreError>;
    /// Replaces the password hash and ends all of the user's sessions, atomically.
    /// Returns whether the user exists.
    async fn set_password(
        &self,
        username: &Username,
        password_hash: String,
    ) -> Result<bool, StoreError>;
    /// The person's own new password: replaces the hash, clears `must_change_password` and
    /// ends every other session of theirs (not `keep`), atomically.
    async fn set_own_password(
        &self,
        id: Uuid,
        password_hash: String,
        keep: &SecretHash,
    ) -> Result<(), StoreError>;
    /// Applies an admin's change to the person with this id in one transaction, ending
    /// their sessions when it disables or deletes them, unless it would leave no enabled
    /// admin (see [`AccountChange::removes_an_admin`]).
    async fn change_account(
        &self,
        id: Uuid,
        change: &AccountChange,
        now: DateTime<Utc>,
    ) -> Result<AccountChanged, StoreError>;

    /// Inserts a session; its last use is its creation.
    async fn insert_session(&self, session: NewSession) -> Result<(), StoreError>;
    /// The session with this hash and its user, expired or not.
    async fn session(&self, token_hash: &SecretHash) -> Result<Option<StoredSession>, StoreError>;
    /// Records that the session was used at `now`.
    async fn touch_session(
        &self,
        token_hash: &SecretHash,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Ends a session (no error when there is none).
    async fn delete_session(&self, token_hash: &SecretHash) -> Result<(), StoreError>;

    /// Inserts an API key.
    async fn insert_api_key(&self, key: NewApiKey) -> Result<(), StoreError>;
    /// The key with this hash, revoked or not.
    async fn api_key_by_hash(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<ApiKeyInfo>, StoreError>;
    /// Records that the key was used at `now`.
    async fn touch_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<(), StoreError>;
    /// Every key, newest first.
    async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, StoreError>;
    /// Revokes the key at `now` unless it already is; returns whether the key exists.
    async fn revoke_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    fn session(expires_in: Duration, used_ago: Duration, now: DateTime<Utc>) -> StoredSession {
        StoredSession {
            user: UserInfo {
                id: Uuid::nil(),
                username: Username::try_from("ada").unwrap(),
                role: Role::Viewer,
                created_at: now - Duration::hours(1),
                disabled: false,
                must_change_password: false,
            },
            expires_at: now + expires_in,
            last_used_at: now - used_ago,
        }
    }

    #[test]
    fn a_session_is_live_until_its_end_or_until_it_lies_idle_too_long() {
        let now = Utc::now();
        let idle = Duration::minutes(30);
        let minutes = Duration::minutes;
        // (ends in, last used ago, live?)
        let cases = [
            (minutes(60), minutes(0), true),
            (minutes(60), minutes(29), true),
            (minutes(60), minutes(30), false),
            (minutes(60), minutes(31), false),
            (minutes(0), minutes(0), false),
            (minutes(-1), minutes(0), false),
            (Duration::seconds(1), minutes(29), true),
        ];
        for (ends_in, used_ago, live) in cases {
            assert_eq!(
                session(ends_in, used_ago, now).is_live(now, idle),
                live,
                "ends in {ends_in}, used {used_ago} ago"
            );
        }
    }
}
