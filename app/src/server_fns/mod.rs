//! Server functions: the UI's thin doors into the services. Each takes the service from the
//! Leptos context (provided by the server at startup), calls it, and maps the error.

mod auth;

pub use auth::{current_user, login, logout, CurrentUser, Login, Logout};

#[cfg(feature = "ssr")]
mod context {
    use crate::identity::{Identity, SessionCookie};
    use crate::UiError;
    use leptos::prelude::use_context;

    /// The identity service, provided by the server for every request.
    pub fn identity() -> Result<Identity, UiError> {
        use_context::<Identity>().ok_or_else(|| missing("Identity"))
    }

    /// The audit log, provided by the server for every request.
    pub fn audit() -> Result<crate::audit::AuditLog, UiError> {
        use_context::<crate::audit::AuditLog>().ok_or_else(|| missing("AuditLog"))
    }

    /// How the session cookie is written.
    pub fn session_cookie() -> Result<SessionCookie, UiError> {
        use_context::<SessionCookie>().ok_or_else(|| missing("SessionCookie"))
    }

    /// The address the request came from (for login throttling).
    pub fn client_address() -> Option<std::net::IpAddr> {
        let parts = use_context::<http::request::Parts>()?;
        let info = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()?;
        Some(info.0.ip())
    }

    /// The session token of the current request, if the browser sent one.
    pub fn session_token() -> Option<String> {
        let parts = use_context::<http::request::Parts>()?;
        SessionCookie::read(&parts.headers)
    }

    /// Sets the response status that matches the error, then hands the error back.
    pub fn answer_with_status(error: impl Into<UiError>) -> UiError {
        let error = error.into();
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(error.status());
        }
        error
    }

    fn missing(what: &str) -> UiError {
        tracing::error!(what, "service missing from the Leptos context");
        UiError::Internal
    }
}
