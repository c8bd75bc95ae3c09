//! `ApiError`: every failure of the REST API, answered in the contract's shape
//! `{"error": {"code", "message", "details"}}`. Client errors explain themselves; server
//! errors are logged with their cause and answered generically.

use app::identity::IdentityError;
use app::store_error::StoreError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The result type of handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// A failure of a REST request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed or invalid; nothing was changed.
    #[error("{message}")]
    BadRequest {
        code: &'static str,
        message: String,
        details: Value,
    },
    /// 401: no credentials, or credentials that do not identify anyone.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// 403: the caller is known but lacks the role.
    #[error("your role does not allow this")]
    Forbidden,
    /// 403: the person signed in with a generated password and must choose their own first.
    #[error("choose a new password first: POST /auth/password")]
    PasswordChangeRequired,
    /// 403: a browser was made to send a state change from another site.
    #[error("cross-site requests may not change anything; use idem's own pages or an API key")]
    CrossSite,
    /// 404: nothing here (or nothing this caller may see).
    #[error("{0}")]
    NotFound(&'static str),
    /// 409: the request conflicts with the current state.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// 413: the body is over the configured limit (`IDEM_MAX_BODY_BYTES`).
    #[error("the request body is larger than this server accepts")]
    PayloadTooLarge,
    /// 429: too many attempts; try again after the given seconds.
    #[error("{message}")]
    TooManyRequests {
        message: String,
        retry_after_seconds: u64,
    },
    /// 415: the body is not declared as JSON.
    #[error("expected a JSON body with Content-Type: application/json")]
    UnsupportedMediaType,
    /// 502: a tool's provider did not answer.
    #[error("{message}")]
    BadGateway {
        code: &'static str,
        message: String,
        details: Value,
    },
    /// 503: the process cannot do its work (`/readyz`); `details` says what is missing.
    #[error("{message}")]
    Unavailable {
        message: &'static str,
        details: Value,
    },
    /// 503: every turn to check a password is taken; nothing was checked, retry shortly.
    #[error("too many sign-ins at once; try again in a moment")]
    SignInBusy,
    /// 503: the database cannot be reached for now; nothing was changed, retry later.
    #[error("the database is unavailable; nothing was changed, try again shortly")]
    DatabaseUnavailable,
    /// 500: a failure of ours; the cause goes to the log only.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// A 400 with a code and a message.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
            details: json!({}),
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden | ApiError::CrossSite | ApiError::PasswordChangeRequired => {
                StatusCode::FORBIDDEN
            }
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadGateway { .. } => StatusCode::BAD_GATEWAY,
            ApiError::Unavailable { .. } | ApiError::DatabaseUnavailable | ApiError::SignInBusy => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest { code, .. }
            | ApiError::Conflict { code, .. }
            | ApiError::BadGateway { code, .. } => code,
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::PasswordChangeRequired => "password_change_required",
            ApiError::CrossSite => "cross_site_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::TooManyRequests { .. } => "too_many_requests",
            ApiError::Unavailable { .. } => "service_unavailable",
            ApiError::DatabaseUnavailable => "database_unavailable",
            ApiError::SignInBusy => "sign_in_busy",
            ApiError::Internal(_) => "internal_error",
        }
    }
}

/// The contract's error body, as the OpenAPI document describes it. Answers are built by
/// [`error_body`]; this type only gives them a schema.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: never built
pub struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: never built
struct ErrorDetail {
    /// Stable, machine-readable, `snake_case` (`idempotency_key_reused`, `lease_lost`, …).
    code: String,
    /// A sentence for the caller.
    message: String,
    /// More about this error; `{}` when there is nothing more.
    #[schema(value_type = Object)]
    details: Value,
}

/// The contract's error body.
pub fn error_body(code: &str, message: &str, details: Value) -> Value {
    json!({ "error": { "code": code, "message": message, "details": details } })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(error = %cause, "request failed");
        }
        let details = match &self {
            ApiError::BadRequest { details, .. }
            | ApiError::BadGateway { details, .. }
            | ApiError::Unavailable { details, .. } => details.clone(),
            _ => json!({}),
        };
        let body = error_body(self.code(), &self.to_string(), details);
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after_seconds() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if matches!(self, ApiError::Unauthorized(_)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl ApiError {
    /// When to try again, for the answers that say so (`Retry-After`).
    fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            ApiError::TooManyRequests {
                retry_after_seconds,
                ..
            } => Some(*retry_after_seconds),
            ApiError::DatabaseUnavailable => Some(DATABASE_RETRY_AFTER_SECONDS),
            ApiError::SignInBusy => Some(1),
            _ => None,
        }
    }
}

/// How long a caller should wait before retrying while the database is out of reach: long
/// enough not to pile on a database that is coming back, short enough for a restart.
const DATABASE_RETRY_AFTER_SECONDS: u64 = 2;

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "the database is unavailable");
                ApiError::DatabaseUnavailable
            }
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

impl From<IdentityError> for ApiError {
    fn from(error: IdentityError) -> Self {
        match error {
            // A disabled person learns no more than a wrong password tells.
            IdentityError::InvalidCredentials | IdentityError::AccountDisabled => {
                ApiError::Unauthorized("wrong username or password")
            }
            IdentityError::WrongCurrentPassword => {
                ApiError::bad_request("wrong_current_password", error.to_string())
            }
            IdentityError::Throttled {
                retry_after_seconds,
                ..
            } => ApiError::TooManyRequests {
                message: error.to_string(),
                retry_after_seconds,
            },
            IdentityError::Busy => ApiError::SignInBusy,
            IdentityError::UsernameTaken(_) => ApiError::Conflict {
                code: "username_taken",
                message: error.to_string(),
            },
            IdentityError::UnknownUser(_) => ApiError::NotFound("no such user"),
            IdentityError::WeakPassword { .. } => {
                ApiError::bad_request("weak_password", error.to_string())
            }
            IdentityError::BadKeyName => {
                ApiError::bad_request("invalid_request", error.to_string())
            }
            IdentityError::Store(inner) => inner.into(),
        }
    }
}
