//! Rows as both databases return them, and their conversion into domain types. The SQL that
//! fills them sits in `sqlite.rs` and `postgres.rs`, which differ in dialect, not in shape.

use app::domain::{ApiKeyInfo, Role, UserInfo};
use app::identity::{StoredSession, StoredUser};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Columns selected for a user.
pub const USER_COLUMNS: &str =
    "id, username, role, password_hash, created_at, disabled_at, must_change_password";
/// Columns selected for an API key.
pub const API_KEY_COLUMNS: &str =
    "id, namespace, name, prefix, created_at, last_used_at, revoked_at";

#[derive(sqlx::FromRow)]
pub struct UserRow {
    id: Uuid,
    username: String,
    role: String,
    password_hash: String,
    created_at: DateTime<Utc>,
    disabled_at: Option<DateTime<Utc>>,
    must_change_password: bool,
}

impl TryFrom<UserRow> for StoredUser {
    type Error = StoreError;
    fn try_from(row: UserRow) -> Result<Self, StoreError> {
        Ok(StoredUser {
            info: UserInfo {
                id: row.id,
                username: row.username.try_into().map_err(corrupt)?,
                role: row.role.parse::<Role>().map_err(corrupt)?,
                created_at: row.created_at,
                disabled: row.disabled_at.is_some(),
                must_change_password: row.must_change_password,
            },
            password_hash: row.password_hash,
        })
    }
}

/// A session joined with its user.
#[derive(sqlx::FromRow)]
pub struct SessionUserRow {
    #[sqlx(flatten)]
    pub user: UserRow,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: DateTime<Utc>,
}

impl TryFrom<SessionUserRow> for StoredSession {
    type Error = StoreError;
    fn try_from(row: SessionUserRow) -> Result<Self, StoreError> {
        Ok(StoredSession {
            user: StoredUser::try_from(row.user)?.info,
            expires_at: row.expires_at,
            last_used_at: row.last_used_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub struct ApiKeyRow {
    id: Uuid,
    namespace: String,
    name: String,
    prefix: String,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
}

impl TryFrom<ApiKeyRow> for ApiKeyInfo {
    type Error = StoreError;
    fn try_from(row: ApiKeyRow) -> Result<Self, StoreError> {
        Ok(ApiKeyInfo {
            id: row.id,
            namespace: row.namespace.try_into().map_err(corrupt)?,
            name: row.name,
            prefix: row.prefix,
            created_at: row.created_at,
            last_used_at: row.last_used_at,
            revoked_at: row.revoked_at,
        })
    }
}

fn corrupt(error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(error.to_string())
}

/// Converts every row, failing on the first that does not fit the domain.
pub fn convert_all<R, T>(rows: Vec<R>) -> Result<Vec<T>, StoreError>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}
