//! Users, sessions and API keys (the statements live in `identity_sql`).

use app::domain::{ApiKeyInfo, UserInfo, Username};
use app::identity::{
    AccountChange, AccountChanged, IdentityStore, NewApiKey, NewSession, NewUser, SecretHash,
    StoredSession, StoredUser,
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

// Two admins disabling each other at once must not both pass the last-admin check: the
// enabled admins' rows are locked for the length of the change.
impl_identity_store!(
    store: PostgresStore,
    reader: pool,
    writer: pool,
    lock_admins: "select id from users where role = 'admin' and disabled_at is null for update"
);
