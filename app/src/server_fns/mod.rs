//! Server functions: the UI's thin doors into the services. Each takes the service from the
//! Leptos context (provided by the server at startup), calls it, and maps the error.
//!
//! Those that pages read take their services from the context before their first `.await`:
//! server rendering may drop a pass of a page (and the owner holding the context) while its
//! reads are still in flight, and a read that then failed would be sent to the browser as
//! the data to hydrate with.

mod admin;
mod approvals;
mod auth;
mod operations;
mod overview;
mod tools;

pub use admin::{
    create_api_key, create_user, delete_user, list_api_keys, list_users, revoke_api_key,
    update_user, CreateApiKey, CreateUser, CreatedKeyView, DeleteUser, ListApiKeys, ListUsers,
    RevokeApiKey, UpdateUser,
};
pub use approvals::{
    approval_queue, read_approval, waiting_approvals, ApprovalDetail, ApprovalQueue,
    ApprovalRequest, ReadApproval, WAITING_SHOWN_UP_TO,
};
pub use auth::{
    change_password, current_user, login, logout, ChangePassword, CurrentUser, Login, Logout,
};
pub use operations::{
    approve_operation, expire_operation, list_operations, read_earlier_events, read_operation,
    reconcile_operation, reject_operation, resolve_operation, ApproveOperation, ExpireOperation,
    ListOperations, OperationsPage, ReadEarlierEvents, ReadOperation, ReconcileOperation,
    RejectOperation, ResolveOperation, EVENTS_PAGE_SIZE, PAGE_SIZE,
};
pub use overview::{overview, tools_overview, Overview, ToolsOverview, WINDOWS};
pub use tools::{
    approval_name, guarantee_name, list_tools, register_tool, ListTools, RegisterTool, ToolForm,
    ToolView, EFFECTS,
};

#[cfg(feature = "ssr")]
mod context {
    use crate::identity::{Identity, SessionCookie};
    use crate::UiError;
    use leptos::prelude::use_context;

    /// The ledger, provided by the server for every request.
    pub fn ledger() -> Result<crate::ledger::Ledger, UiError> {
        use_context::<crate::ledger::Ledger>().ok_or_else(|| missing("Ledger"))
    }

    /// People's actions on operations, provided by the server for every request.
    pub fn people_actions() -> Result<crate::people_actions::PeopleActions, UiError> {
        use_context::<crate::people_actions::PeopleActions>()
            .ok_or_else(|| missing("PeopleActions"))
    }

    /// Admins' actions (tools, people, API keys), provided by the server for every request.
    pub fn admin_actions() -> Result<crate::admin_actions::AdminActions, UiError> {
        use_context::<crate::admin_actions::AdminActions>().ok_or_else(|| missing("AdminActions"))
    }

    /// The signed-in person, if their role allows `permission`, as the shared actions take
    /// them.
    pub async fn acting(
        permission: crate::domain::Permission,
    ) -> Result<crate::people_actions::Acting, UiError> {
        // Read before the await: the request's context may be gone once it resumes.
        let address = client_address();
        Ok(crate::people_actions::Acting {
            person: person_who_may(permission).await?,
            address,
        })
    }

    /// The metrics reader, provided by the server for every request.
    pub fn metrics() -> Result<crate::ledger::metrics::Metrics, UiError> {
        use_context::<crate::ledger::metrics::Metrics>().ok_or_else(|| missing("Metrics"))
    }

    /// The person signed in, if their role carries `permission`: `Unauthorized` without a
    /// live session, `Forbidden` without the role. Every server function that reads or
    /// changes the ledger starts here, so a forged request is refused whatever the page showed.
    pub async fn person_who_may(
        permission: crate::domain::Permission,
    ) -> Result<crate::domain::UserInfo, UiError> {
        let (person, _) = signed_in().await?;
        if person.must_change_password {
            return Err(answer_with_status(UiError::PasswordChangeRequired));
        }
        if person.role.can(permission) {
            Ok(person)
        } else {
            Err(answer_with_status(UiError::Forbidden))
        }
    }

    /// The person of the live session and its token, even one who must still change a
    /// generated password (only the password change takes them as they are).
    pub async fn signed_in() -> Result<(crate::domain::UserInfo, String), UiError> {
        let token = session_token()
            .ok_or_else(|| answer_with_status(UiError::Unauthorized("sign in first".into())))?;
        let person = identity()?
            .person_for_session(&token)
            .await
            .map_err(answer_with_status)?
            .ok_or_else(|| answer_with_status(UiError::Unauthorized("sign in first".into())))?;
        Ok((person, token))
    }

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
