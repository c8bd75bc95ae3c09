//! Administration over REST (admin only): API keys and users. The same actions exist on the
//! command line (`idem keys …`, `idem users …`).

use app::admin_actions::AdminError;
use app::domain::{ApiKeyInfo, Namespace, Role, UserInfo, Username};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch};
use axum::Router;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::audit::ClientAddress;
use super::auth::Admin;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use crate::startup::AppState;

/// `/v1/keys` and `/v1/users`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/keys", get(list_keys).post(create_key))
        .route("/v1/keys/{id}", delete(revoke_key))
        .route("/v1/users", get(list_users).post(create_user))
        .route("/v1/users/{id}", patch(update_user).delete(delete_user))
}

#[derive(Deserialize, utoipa::ToSchema)]
struct CreateKeyRequest {
    #[schema(value_type = Namespace)]
    namespace: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct CreatedKey {
    /// The key itself: shown in this answer only.
    key: String,
    api_key: ApiKeyInfo,
}

#[derive(Serialize, utoipa::ToSchema)]
struct KeyList {
    api_keys: Vec<ApiKeyInfo>,
}

/// Creates an API key of a namespace; the key itself is shown in this answer only.
#[utoipa::path(
    post,
    path = "/v1/keys",
    tag = "admin",
    security(("session" = [])),
    request_body = CreateKeyRequest,
    responses(
        (status = 201, body = CreatedKey,
            description = "The key, shown this once, and its listing"),
        (status = 400, body = ErrorBody,
            description = "`malformed_json`, `invalid_request` or `invalid_namespace`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn create_key(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    AppJson(body): AppJson<CreateKeyRequest>,
) -> ApiResult<Response> {
    let by = person.acting(address);
    let created = state
        .admin_actions
        .create_api_key(&by, body.namespace, body.name)
        .await?;
    let created = CreatedKey {
        key: created.secret.expose().to_owned(),
        api_key: created.info,
    };
    Ok((StatusCode::CREATED, AppJson(created)).into_response())
}

/// Every API key, revoked ones included, never their secrets.
#[utoipa::path(
    get,
    path = "/v1/keys",
    tag = "admin",
    security(("session" = [])),
    responses(
        (status = 200, body = KeyList, description = "The API keys"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
    )
)]
async fn list_keys(State(state): State<AppState>, _admin: Admin) -> ApiResult<AppJson<KeyList>> {
    let api_keys = state.identity.list_api_keys().await?;
    Ok(AppJson(KeyList { api_keys }))
}

/// Revokes an API key: it stops working at once.
#[utoipa::path(
    delete,
    path = "/v1/keys/{id}",
    tag = "admin",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The key's `id`")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
        (status = 404, body = ErrorBody, description = "`not_found`: no such API key"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username, key_id = %id))]
async fn revoke_key(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound("no such API key"))?;
    let by = person.acting(address);
    state.admin_actions.revoke_api_key(&by, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
struct CreateUserRequest {
    #[schema(value_type = Username)]
    username: String,
    #[schema(value_type = Role)]
    role: String,
    password: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct UserList {
    users: Vec<UserInfo>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct CreatedUser {
    user: UserInfo,
}

/// Creates a person with a role and a password.
#[utoipa::path(
    post,
    path = "/v1/users",
    tag = "admin",
    security(("session" = [])),
    request_body = CreateUserRequest,
    responses(
        (status = 201, body = CreatedUser, description = "The new person"),
        (status = 400, body = ErrorBody,
            description = "`malformed_json`, `invalid_request`, `invalid_username`, \
                `invalid_role` or `weak_password`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
        (status = 409, body = ErrorBody, description = "`username_taken`"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn create_user(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    AppJson(body): AppJson<CreateUserRequest>,
) -> ApiResult<Response> {
    let by = person.acting(address);
    let user = state
        .admin_actions
        .create_user(&by, body.username, &body.role, &body.password)
        .await?;
    Ok((StatusCode::CREATED, AppJson(CreatedUser { user })).into_response())
}

/// Every person, never their password hashes.
#[utoipa::path(
    get,
    path = "/v1/users",
    tag = "admin",
    security(("session" = [])),
    responses(
        (status = 200, body = UserList, description = "The people"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
    )
)]
async fn list_users(State(state): State<AppState>, _admin: Admin) -> ApiResult<AppJson<UserList>> {
    let users = state.identity.list_users().await?;
    Ok(AppJson(UserList { users }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateUserRequest {
    /// `true` disables the person (their sessions end at once), `false` enables them.
    #[serde(default)]
    disabled: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Role>)]
    role: Option<String>,
}

/// Disables or enables a person, or changes their role (at least one of the two).
#[utoipa::path(
    patch,
    path = "/v1/users/{id}",
    tag = "admin",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The person's `id`")),
    request_body = UpdateUserRequest,
    responses(
        (status = 200, body = CreatedUser, description = "The person as they are now"),
        (status = 400, body = ErrorBody,
            description = "`malformed_json`, `invalid_request` or `invalid_role`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
        (status = 404, body = ErrorBody, description = "`not_found`: no such user"),
        (status = 409, body = ErrorBody,
            description = "`last_admin`: it would leave no enabled admin"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn update_user(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    Path(id): Path<String>,
    AppJson(body): AppJson<UpdateUserRequest>,
) -> ApiResult<AppJson<CreatedUser>> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound("no such user"))?;
    let by = person.acting(address);
    let user = state
        .admin_actions
        .update_user(&by, id, body.disabled, body.role.as_deref())
        .await?;
    Ok(AppJson(CreatedUser { user }))
}

/// Deletes a person and ends their sessions; the audit keeps their name.
#[utoipa::path(
    delete,
    path = "/v1/users/{id}",
    tag = "admin",
    security(("session" = [])),
    params(("id" = Uuid, Path, description = "The person's `id`")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
        (status = 404, body = ErrorBody, description = "`not_found`: no such user"),
        (status = 409, body = ErrorBody,
            description = "`last_admin`: it would leave no enabled admin"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username))]
async fn delete_user(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::NotFound("no such user"))?;
    let by = person.acting(address);
    state.admin_actions.delete_user(&by, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

impl From<AdminError> for ApiError {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::InvalidNamespace(message) => {
                ApiError::bad_request("invalid_namespace", message)
            }
            AdminError::InvalidUsername(message) => {
                ApiError::bad_request("invalid_username", message)
            }
            AdminError::InvalidRole(message) => ApiError::bad_request("invalid_role", message),
            AdminError::NoSuchKey => ApiError::NotFound("no such API key"),
            AdminError::NoSuchUser => ApiError::NotFound("no such user"),
            AdminError::LastAdmin => ApiError::Conflict {
                code: "last_admin",
                message: error.to_string(),
            },
            AdminError::NothingToChange => {
                ApiError::bad_request("invalid_request", error.to_string())
            }
            AdminError::Identity(error) => error.into(),
            AdminError::Ledger(error) => error.into(),
        }
    }
}
