//! People and API keys for the admin page (admins only), through the same path and audit as
//! `/v1/users` and `/v1/keys`.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{ApiKeyInfo, UserInfo};
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{acting, admin_actions, answer_with_status, identity, person_who_may};
#[cfg(feature = "ssr")]
use crate::domain::Permission;

/// A key just created: the key itself, shown this once, and its listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedKeyView {
    pub key: String,
    pub api_key: ApiKeyInfo,
}

/// Every person.
#[server(prefix = "/api", endpoint = "users")]
pub async fn list_users() -> Result<Vec<UserInfo>, UiError> {
    let identity = identity()?;
    person_who_may(Permission::Administer).await?;
    identity.list_users().await.map_err(answer_with_status)
}

/// Creates a person with a role and a password.
#[server(prefix = "/api", endpoint = "create_user")]
pub async fn create_user(
    username: String,
    role: String,
    password: String,
) -> Result<UserInfo, UiError> {
    let by = acting(Permission::Administer).await?;
    admin_actions()?
        .create_user(&by, username.trim().to_owned(), &role, &password)
        .await
        .map_err(answer_with_status)
}

/// Disables or enables a person, or changes their role; disabling ends their sessions.
#[server(prefix = "/api", endpoint = "update_user")]
pub async fn update_user(
    id: Uuid,
    disabled: Option<bool>,
    role: Option<String>,
) -> Result<UserInfo, UiError> {
    let by = acting(Permission::Administer).await?;
    admin_actions()?
        .update_user(&by, id, disabled, role.as_deref())
        .await
        .map_err(answer_with_status)
}

/// Deletes a person and ends their sessions; the audit keeps their name.
#[server(prefix = "/api", endpoint = "delete_user")]
pub async fn delete_user(id: Uuid) -> Result<(), UiError> {
    let by = acting(Permission::Administer).await?;
    admin_actions()?
        .delete_user(&by, id)
        .await
        .map_err(answer_with_status)
}

/// Every API key, revoked ones included, never their secrets.
#[server(prefix = "/api", endpoint = "api_keys")]
pub async fn list_api_keys() -> Result<Vec<ApiKeyInfo>, UiError> {
    let identity = identity()?;
    person_who_may(Permission::Administer).await?;
    identity.list_api_keys().await.map_err(answer_with_status)
}

/// Creates an API key of a namespace; the answer holds the only copy of the key.
#[server(prefix = "/api", endpoint = "create_api_key")]
pub async fn create_api_key(
    namespace: String,
    name: Option<String>,
) -> Result<CreatedKeyView, UiError> {
    let by = acting(Permission::Administer).await?;
    let name = name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    let created = admin_actions()?
        .create_api_key(&by, namespace.trim().to_owned(), name)
        .await
        .map_err(answer_with_status)?;
    Ok(CreatedKeyView {
        key: created.secret.expose().to_owned(),
        api_key: created.info,
    })
}

/// Revokes an API key: it stops working at once.
#[server(prefix = "/api", endpoint = "revoke_api_key")]
pub async fn revoke_api_key(id: Uuid) -> Result<(), UiError> {
    let by = acting(Permission::Administer).await?;
    admin_actions()?
        .revoke_api_key(&by, id)
        .await
        .map_err(answer_with_status)
}
