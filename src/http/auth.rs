//! Who is calling: extractors for agents (API key) and people (session cookie), and the
//! `/auth` routes that open and close sessions.

use app::domain::{Namespace, Permission, UserInfo};
use app::identity::{Agent, SessionCookie};
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::header::{AUTHORIZATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

use super::error::{ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use crate::startup::AppState;

/// An agent: the request carried `Authorization: Bearer <api key>` of a live key.
#[derive(Debug, Clone)]
pub struct AgentCaller(pub Agent);

impl AgentCaller {
    /// The namespace every operation of this caller lives in.
    pub fn namespace(&self) -> &Namespace {
        &self.0.namespace
    }
}

/// A person signed in with a session cookie.
#[derive(Debug, Clone)]
pub struct Person(pub UserInfo);

impl Person {
    /// Refuses with 403 unless the person's role carries the permission.
    pub fn require(&self, permission: Permission) -> ApiResult<()> {
        if self.0.role.can(permission) {
            Ok(())
        } else {
            Err(ApiError::Forbidden)
        }
    }
}

/// A person whose role may reconcile, resolve and expire operations; refuses before the body
/// is read.
#[derive(Debug, Clone)]
pub struct Operator(pub Person);

/// A person whose role may approve and reject. As an extractor it refuses before the body
/// is read, so a caller without the role is told 403 whatever they send.
#[derive(Debug, Clone)]
pub struct Approver(pub Person);

/// A person whose role may manage users, API keys and tools; refuses before the body is read.
#[derive(Debug, Clone)]
pub struct Admin(pub Person);

/// Either kind of caller, for routes open to both.
#[derive(Debug, Clone)]
pub enum Caller {
    Agent(AgentCaller),
    Person(Person),
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

async fn agent_from(parts: &Parts, state: &AppState) -> ApiResult<Option<AgentCaller>> {
    let Some(token) = bearer_token(&parts.headers) else {
        return Ok(None);
    };
    let agent = state
        .identity
        .agent_for_key(token)
        .await?
        .ok_or(ApiError::Unauthorized("invalid or revoked API key"))?;
    // Counted once the key is known to be real, so invented keys cannot fill the limiter.
    state.key_rate_limit.check(agent.key_id)?;
    Ok(Some(AgentCaller(agent)))
}

/// The person of a live session, even one who must still change a generated password.
async fn signed_in_from(parts: &Parts, state: &AppState) -> ApiResult<Option<SignedIn>> {
    let Some(token) = SessionCookie::read(&parts.headers) else {
        return Ok(None);
    };
    let user = state.identity.person_for_session(&token).await?;
    Ok(user.map(|user| SignedIn { user, token }))
}

/// The person of a live session, refused until they have changed a generated password.
async fn person_from(parts: &Parts, state: &AppState) -> ApiResult<Option<Person>> {
    match signed_in_from(parts, state).await? {
        Some(signed_in) if signed_in.user.must_change_password => {
            Err(ApiError::PasswordChangeRequired)
        }
        signed_in => Ok(signed_in.map(|signed_in| Person(signed_in.user))),
    }
}

/// A person signed in, even one who must first change the password they were given: only
/// `/auth/password` and `/auth/me` take this; every other route takes [`Person`].
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub user: UserInfo,
    /// The session's token, so a password change can keep this session.
    token: String,
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if bearer_token(&parts.headers).is_some() {
            agent_from(parts, state).await?;
            return Err(ApiError::Forbidden);
        }
        signed_in_from(parts, state)
            .await?
            .ok_or(ApiError::Unauthorized("sign in first"))
    }
}

impl FromRequestParts<AppState> for AgentCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if let Some(agent) = agent_from(parts, state).await? {
            return Ok(agent);
        }
        // A signed-in person on an agent's route: known caller, wrong kind.
        if person_from(parts, state).await?.is_some() {
            return Err(ApiError::Forbidden);
        }
        Err(ApiError::Unauthorized(
            "an API key is required: Authorization: Bearer <key>",
        ))
    }
}

impl FromRequestParts<AppState> for Person {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if bearer_token(&parts.headers).is_some() {
            // An agent asking for a person's route: known caller, wrong kind.
            agent_from(parts, state).await?;
            return Err(ApiError::Forbidden);
        }
        person_from(parts, state)
            .await?
            .ok_or(ApiError::Unauthorized("sign in first"))
    }
}

async fn person_who_may(
    parts: &mut Parts,
    state: &AppState,
    permission: Permission,
) -> ApiResult<Person> {
    let person = Person::from_request_parts(parts, state).await?;
    person.require(permission)?;
    Ok(person)
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        person_who_may(parts, state, Permission::Operate)
            .await
            .map(Operator)
    }
}

impl FromRequestParts<AppState> for Approver {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        person_who_may(parts, state, Permission::Approve)
            .await
            .map(Approver)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        person_who_may(parts, state, Permission::Administer)
            .await
            .map(Admin)
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if let Some(agent) = agent_from(parts, state).await? {
            return Ok(Caller::Agent(agent));
        }
        let person = person_from(parts, state).await?;
        person
            .map(Caller::Person)
            .ok_or(ApiError::Unauthorized("sign in or send an API key"))
    }
}

/// The credential a request presented, kept by a long-lived request (a change stream) to
/// check again later.
pub enum Credential {
    ApiKey(String),
    Session(String),
}

impl Credential {
    /// The API key or else the session cookie of a request.
    pub fn of(headers: &HeaderMap) -> Option<Self> {
        if let Some(token) = bearer_token(headers) {
            return Some(Credential::ApiKey(token.to_owned()));
        }
        SessionCookie::read(headers).map(Credential::Session)
    }

    /// Whether it still identifies someone: the key is not revoked; the session has not
    /// ended, expired or idled out, and its person is not disabled. When the database
    /// cannot tell, it is taken as valid (an outage ends no stream).
    pub async fn is_still_valid(&self, state: &AppState) -> bool {
        match self {
            Credential::ApiKey(token) => {
                !matches!(state.identity.agent_for_key(token).await, Ok(None))
            }
            Credential::Session(token) => {
                !matches!(state.identity.session_is_live(token).await, Ok(false))
            }
        }
    }
}

/// The `/auth` routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/auth/me", get(me))
        .route("/auth/password", post(change_password))
}

#[derive(Deserialize, utoipa::ToSchema)]
struct ChangePasswordRequest {
    current_password: String,
    new_password: String,
}

/// Changes the signed-in person's own password and ends their other sessions (this one
/// stays). The only route open to a person who must still change a generated password.
#[utoipa::path(
    post,
    path = "/auth/password",
    tag = "auth",
    security(("session" = [])),
    request_body = ChangePasswordRequest,
    responses(
        (status = 204, description = "Changed; the person's other sessions have ended"),
        (status = 400, body = ErrorBody,
            description = "`malformed_json`, `invalid_request`, `weak_password` or \
                `wrong_current_password`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: an API key (this is for people)"),
    )
)]
#[tracing::instrument(skip_all)]
async fn change_password(
    State(state): State<AppState>,
    signed_in: SignedIn,
    address: super::audit::ClientAddress,
    AppJson(body): AppJson<ChangePasswordRequest>,
) -> ApiResult<StatusCode> {
    state
        .identity
        .change_own_password(
            &signed_in.user,
            &signed_in.token,
            &body.current_password,
            &body.new_password,
        )
        .await?;
    let by = Person(signed_in.user).acting(address);
    state
        .audit
        .record(app::audit::PersonAction {
            actor: app::audit::person_actor(&by.person.username),
            address: by.address,
            action: app::audit::actions::PASSWORD_CHANGED,
            subject: format!("user:{}", by.person.username),
            detail: serde_json::json!({ "own": true }),
        })
        .await;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
struct LoginRequest {
    username: String,
    password: String,
}

#[derive(Serialize, utoipa::ToSchema)]
struct UserResponse {
    user: UserInfo,
}

/// Opens a session: sets the `idem_session` cookie.
#[utoipa::path(
    post,
    path = "/auth/login",
    tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, body = UserResponse,
            description = "Signed in; the answer sets the `idem_session` cookie",
            headers(("set-cookie" = String,
                description = "`idem_session=…; HttpOnly; SameSite=Strict`"))),
    )
)]
#[tracing::instrument(skip_all)]
async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    AppJson(body): AppJson<LoginRequest>,
) -> ApiResult<Response> {
    let address = Some(peer.ip());
    let outcome = state
        .identity
        .login(&body.username, &body.password, address)
        .await;
    let tried = outcome.as_ref().map(|(user, _)| user);
    state.audit.login(&body.username, address, tried).await;
    let (user, token) = outcome?;
    let cookie = state
        .session_cookie
        .set(token.expose(), state.identity.session_lifetime());
    Ok(([(SET_COOKIE, cookie)], AppJson(UserResponse { user })).into_response())
}

/// Closes the session, if there is one, and clears the cookie.
#[utoipa::path(
    post,
    path = "/auth/logout",
    tag = "auth",
    responses(
        (status = 204,
            description = "Signed out (also when no session was open); the cookie is cleared",
            headers(("set-cookie" = String, description = "clears `idem_session`"))),
    )
)]
#[tracing::instrument(skip_all)]
async fn logout(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(token) = SessionCookie::read(&headers) {
        state.identity.logout(&token).await?;
    }
    Ok((
        StatusCode::NO_CONTENT,
        [(SET_COOKIE, state.session_cookie.clear())],
    )
        .into_response())
}

#[derive(Serialize, utoipa::ToSchema)]
struct AgentInfo {
    namespace: Namespace,
    key_id: uuid::Uuid,
    key_name: String,
}

/// `{"agent": …}`, the answer of `/auth/me` to an API key.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler answers with `json!`
struct AgentBody {
    agent: AgentInfo,
}

/// The answer of `/auth/me`: one or the other, depending on the caller.
#[derive(utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // documentation only
enum MeBody {
    Person(UserResponse),
    Agent(AgentBody),
}

/// Who is calling.
///
/// A person gets `{"user": …}`, an agent `{"agent": {"namespace", "key_id", "key_name"}}`.
#[utoipa::path(
    get,
    path = "/auth/me",
    tag = "auth",
    security(("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = MeBody,
            description = "The person or the agent behind the credentials"),
    )
)]
async fn me(caller: MeCaller) -> Response {
    match caller {
        MeCaller::Person(SignedIn { user, .. }) => AppJson(UserResponse { user }).into_response(),
        MeCaller::Agent(AgentCaller(agent)) => AppJson(serde_json::json!({
            "agent": AgentInfo { namespace: agent.namespace, key_id: agent.key_id, key_name: agent.key_name }
        }))
        .into_response(),
    }
}

/// The caller of `/auth/me`: an agent, or a person (one who must change a generated
/// password too, so that clients can tell them to).
enum MeCaller {
    Agent(AgentCaller),
    Person(SignedIn),
}

impl FromRequestParts<AppState> for MeCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        if let Some(agent) = agent_from(parts, state).await? {
            return Ok(MeCaller::Agent(agent));
        }
        signed_in_from(parts, state)
            .await?
            .map(MeCaller::Person)
            .ok_or(ApiError::Unauthorized("sign in or send an API key"))
    }
}
