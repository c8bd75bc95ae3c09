//! The storage port for identity. Implemented once per database in the server crate and
//! checked by one conformance suite.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SecretHash;
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

    /// Inserts a session.
    async fn insert_session(&self, session: NewSession) -> Result<(), StoreError>;
    /// The user of a session that has not expired at `now`.
    async fn session_user(
        &self,
        token_hash: &SecretHash,
        now: DateTime<Utc>,
    ) -> Result<Option<UserInfo>, StoreError>;
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
