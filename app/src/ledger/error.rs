//! Why the ledger refused a request: one error type for every ledger call, which the HTTP
//! adapter maps onto the contract's status codes.

use super::complete::ReportRefused;
use super::settle::SettleRefused;
use super::verdict::VerdictRefused;
use crate::store_error::StoreError;

/// Why the ledger refused a request.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// 400: the request is invalid; nothing was stored.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// 404: no such operation in the caller's namespace.
    #[error("no such operation")]
    NotFound,
    /// 409: a report that does not fit the operation's state.
    #[error(transparent)]
    Refused(#[from] ReportRefused),
    /// 409: a verdict on an operation that does not wait for one.
    #[error(transparent)]
    VerdictRefused(#[from] VerdictRefused),
    /// 409 or 502: a settlement the operation's state (or the provider) did not allow.
    #[error(transparent)]
    SettleRefused(#[from] SettleRefused),
    /// 409 `not_reconcilable`: the operation's tool has no `reconcile_url` to ask.
    #[error(
        "the tool {tool} has no executor.reconcile_url to ask; a person must resolve the operation"
    )]
    NotReconcilable { tool: String },
    /// This server was built without a provider client (a configuration bug).
    #[error("this ledger has no provider client")]
    NoProvider,
    /// A bug or a crash inside the server; logged, answered as 500.
    #[error("{0}")]
    Internal(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl LedgerError {
    pub(super) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        LedgerError::Invalid {
            code,
            message: message.into(),
        }
    }
}
