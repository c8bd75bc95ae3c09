//! The ledger: claim, report, replay. The rules are pure functions (`claim`, `complete`);
//! [`Ledger`] drives them over a [`LedgerStore`], which runs them inside its transactions.

mod changes;
mod claim;
mod complete;
mod error;
mod executor;
pub mod failpoint;
#[cfg(test)]
mod fixtures;
pub mod metrics;
mod model;
mod notes;
mod notify;
mod operator;
mod prepare;
mod provider;
mod sent_claim;
mod service;
mod settle;
mod store;
pub mod telemetry;
mod verdict;
mod write;

pub use changes::{Changes, OperationChange};
pub use claim::{decide_claim, expire_lease_at, provider_key_of, ttl_has_ended, Claim, Fresh};
pub use complete::{decide_report, Report, ReportRefused};
pub use error::LedgerError;
pub use executor::{Invoked, EXECUTOR_ACTOR};
pub use model::{
    Approval, ClaimRequest, Event, EventKind, HeldLease, Lease, LeaseTokenHash, Operation, Runner,
};
pub use notify::{newly_requested, ApprovalNotifier};
pub use operator::{ReconcileRound, RECONCILER_ACTOR};
pub use prepare::{check_request, prepare_claim};
pub use provider::{Execution, Lookup, LookupError, Provider};
pub use sent_claim::SentClaim;
pub use service::{EventsPage, Ledger};
pub use settle::{
    decide_settlement, Resolution, SettleRefused, Settlement, RECONCILE_BACKOFF_SECONDS,
};
pub use store::{EventPage, EventPosition, LedgerStore, OperationFilter, RegisteredTool};
pub use verdict::{decide_verdict, Verdict, VerdictRefused};
pub use write::{Decision, Write};
