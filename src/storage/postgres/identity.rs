//! Users, sessions and API keys (the statements live in `identity_sql`).

use app::domain::{ApiKeyInfo, UserInfo, Username};
use app::identity::{
    IdentityStore, NewApiKey, NewSession, NewUser, SecretHash, StoredSession, StoredUser,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::PostgresStore;
use crate::storage::identity_sql::impl_identity_store;
use crate::storage::rows::{
    convert_all, ApiKeyRow, SessionUserRow, UserRow, API_KEY_COLUMNS, USER_COLUMNS,
};
use crate::storage::store_error;

impl_identity_store!(store: PostgresStore, reader: pool, writer: pool);
