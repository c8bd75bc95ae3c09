//! The ledger: claim, report, replay. The rules are pure functions (`claim`, `complete`);
//! [`Ledger`] drives them over a [`LedgerStore`], which runs them inside its transactions.

mod claim;
mod complete;
mod model;
mod notes;
mod notify;
mod prepare;
mod provider;
mod service;
mod store;
mod verdict;
mod write;

pub use claim::{decide_claim, expire_lease_at, ttl_has_ended, Claim, Fresh};
pub use complete::{decide_report, Report, ReportRefused};
pub use model::{Approval, ClaimRequest, Event, EventKind, Lease, Operation};
pub use notify::{newly_requested, ApprovalNotifier};
pub use prepare::{check_request, prepare_claim};
pub use provider::{Execution, Lookup, LookupError, Provider};
pub use service::{BeginRequest, Ledger, LedgerError};
pub use store::{LedgerStore, OperationFilter, RegisteredTool};
pub use verdict::{decide_verdict, Verdict, VerdictRefused};
pub use write::{Decision, Write};
