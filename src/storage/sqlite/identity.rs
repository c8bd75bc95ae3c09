//! Users, sessions and API keys (the statements live in `identity_sql`).

use app::domain::{ApiKeyInfo, UserInfo, Username};
use app::identity::{
    AccountChange, AccountChanged, IdentityStore, NewApiKey, NewSession, NewUser, SecretHash,
    StoredSession, StoredUser,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SqliteStore;
use crate::storage::identity_sql::impl_identity_store;
use crate::storage::rows::{
    convert_all, ApiKeyRow, SessionUserRow, UserRow, API_KEY_COLUMNS, USER_COLUMNS,
};
use crate::storage::store_error;

// One writer at a time: a change is alone with the last-admin check, no lock needed.
impl_identity_store!(
    store: SqliteStore,
    reader: reader,
    writer: writer,
    lock_admins: "select 1"
);
