//! The error type of the UI's server functions: what the browser may learn about a failure.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// A failure shown to a person in the browser; its message is meant to be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum UiError {
    /// Not signed in, or the credentials were wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// Too many failed sign-ins; the message says how long to wait.
    #[error("{0}")]
    Throttled(String),
    /// Signed in, but the role does not allow this.
    #[error("your role does not allow this")]
    Forbidden,
    /// Signed in with a generated password, which must be changed first.
    #[error("choose a new password first")]
    PasswordChangeRequired,
    /// The input was refused; the message says why.
    #[error("{0}")]
    Invalid(String),
    /// The thing asked for does not exist (any more).
    #[error("{0}")]
    NotFound(String),
    /// The action does not fit the current state (someone else acted first, say).
    #[error("{0}")]
    Conflict(String),
    /// The server failed; details are in its log, not here.
    #[error("something went wrong on the server; please try again")]
    Internal,
    /// The request never got a proper answer (network, decoding).
    #[error("could not reach the server: {0}")]
    Transport(String),
}

impl FromServerFnError for UiError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        UiError::Transport(value.to_string())
    }
}

#[cfg(feature = "ssr")]
impl UiError {
    /// The HTTP status a server function answers with for this error, so that access logs
    /// and proxies see a refused login as a 401 rather than a server failure.
    pub fn status(&self) -> http::StatusCode {
        match self {
            UiError::Unauthorized(_) => http::StatusCode::UNAUTHORIZED,
            UiError::Throttled(_) => http::StatusCode::TOO_MANY_REQUESTS,
            UiError::Forbidden | UiError::PasswordChangeRequired => http::StatusCode::FORBIDDEN,
            UiError::Invalid(_) => http::StatusCode::BAD_REQUEST,
            UiError::NotFound(_) => http::StatusCode::NOT_FOUND,
            UiError::Conflict(_) => http::StatusCode::CONFLICT,
            UiError::Internal | UiError::Transport(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

#[cfg(feature = "ssr")]
impl From<crate::identity::IdentityError> for UiError {
    fn from(error: crate::identity::IdentityError) -> Self {
        use crate::identity::IdentityError as E;
        match error {
            E::InvalidCredentials | E::AccountDisabled => UiError::Unauthorized(error.to_string()),
            E::Throttled { .. } | E::Busy => UiError::Throttled(error.to_string()),
            E::Store(inner) => {
                tracing::error!(error = %inner, "storage failure in a UI request");
                UiError::Internal
            }
            other => UiError::Invalid(other.to_string()),
        }
    }
}

#[cfg(feature = "ssr")]
impl From<crate::ledger::LedgerError> for UiError {
    fn from(error: crate::ledger::LedgerError) -> Self {
        use crate::ledger::LedgerError as E;
        match error {
            E::Invalid { .. } => UiError::Invalid(error.to_string()),
            E::NotFound => UiError::NotFound(error.to_string()),
            E::Refused(_)
            | E::VerdictRefused(_)
            | E::SettleRefused(_)
            | E::NotReconcilable { .. } => UiError::Conflict(error.to_string()),
            E::NoProvider | E::Internal(_) | E::Store(_) => {
                tracing::error!(%error, "ledger failure in a UI request");
                UiError::Internal
            }
        }
    }
}

#[cfg(feature = "ssr")]
impl From<crate::people_actions::ActionError> for UiError {
    fn from(error: crate::people_actions::ActionError) -> Self {
        use crate::people_actions::ActionError as E;
        match error {
            E::MissingReason(message) | E::Invalid(message) => UiError::Invalid(message.into()),
            E::Ledger(error) => error.into(),
        }
    }
}

#[cfg(feature = "ssr")]
impl From<crate::admin_actions::AdminError> for UiError {
    fn from(error: crate::admin_actions::AdminError) -> Self {
        use crate::admin_actions::AdminError as E;
        match error {
            E::InvalidNamespace(message)
            | E::InvalidUsername(message)
            | E::InvalidRole(message) => UiError::Invalid(message),
            E::NoSuchKey | E::NoSuchUser => UiError::NotFound(error.to_string()),
            E::LastAdmin => UiError::Conflict(error.to_string()),
            E::NothingToChange => UiError::Invalid(error.to_string()),
            E::Identity(taken @ crate::identity::IdentityError::UsernameTaken(_)) => {
                UiError::Conflict(taken.to_string())
            }
            E::Identity(error) => error.into(),
            E::Ledger(error) => error.into(),
        }
    }
}
