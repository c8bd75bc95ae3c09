//! Administration over REST (admin only): API keys and users. The same actions exist on the
//! command line (`idem keys …`, `idem users …`).

use app::domain::{ApiKeyInfo, Namespace, Permission, Role, UserInfo, Username};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::Router;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::auth::Person;
use super::error::{ApiError, ApiResult};
use super::json::AppJson;
use crate::startup::AppState;

/// `/v1/keys` and `/v1/users`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/keys", get(list_keys).post(create_key))
        .route("/v1/keys/{id}", delete(revoke_key))
        .route("/v1/users", get(list_users).post(create_user))
}

#[derive(Deserialize)]
struct CreateKeyRequest {
    namespace: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Serialize)]
struct CreatedKey {
    /// The key itself: shown in this answer only.
    key: String,
    api_key: ApiKeyInfo,
}

#[derive(Serialize)]
struct KeyList {
    api_keys: Vec<ApiKeyInfo>,
}

#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn create_key(
    State(state): State<AppState>,
    person: Person,
    AppJson(body): AppJson<CreateKeyRequest>,
) -> ApiResult<Response> {
    person.require(Permission::Administer)?;
    let namespace = Namespace::try_from(body.namespace)
        .map_err(|e| ApiError::bad_request("invalid_namespace", e.to_string()))?;
    let (api_key, secret) = state.identity.create_api_key(namespace, body.name).await?;
    let created = CreatedKey {
        key: secret.expose().to_owned(),
        api_key,
    };
    Ok((StatusCode::CREATED, AppJson(created)).into_response())
}

async fn list_keys(State(state): State<AppState>, person: Person) -> ApiResult<AppJson<KeyList>> {
    person.require(Permission::Administer)?;
    let api_keys = state.identity.list_api_keys().await?;
    Ok(AppJson(KeyList { api_keys }))
}

#[tracing::instrument(skip_all, fields(actor = %person.0.username, key_id = %id))]
async fn revoke_key(
    State(state): State<AppState>,
    person: Person,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    person.require(Permission::Administer)?;
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound("no such API key"))?;
    if state.identity.revoke_api_key(id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("no such API key"))
    }
}

#[derive(Deserialize)]
struct CreateUserRequest {
    username: String,
    role: String,
    password: String,
}

#[derive(Serialize)]
struct UserList {
    users: Vec<UserInfo>,
}

#[derive(Serialize)]
struct CreatedUser {
    user: UserInfo,
}

#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn create_user(
    State(state): State<AppState>,
    person: Person,
    AppJson(body): AppJson<CreateUserRequest>,
) -> ApiResult<Response> {
    person.require(Permission::Administer)?;
    let username = Username::try_from(body.username)
        .map_err(|e| ApiError::bad_request("invalid_username", e.to_string()))?;
    let role = body
        .role
        .parse::<Role>()
        .map_err(|e| ApiError::bad_request("invalid_role", e.to_string()))?;
    let user = state
        .identity
        .create_user(username, role, &body.password)
        .await?;
    Ok((StatusCode::CREATED, AppJson(CreatedUser { user })).into_response())
}

async fn list_users(State(state): State<AppState>, person: Person) -> ApiResult<AppJson<UserList>> {
    person.require(Permission::Administer)?;
    let users = state.identity.list_users().await?;
    Ok(AppJson(UserList { users }))
}
