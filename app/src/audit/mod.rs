//! The audit of people: who did what, when, and from which address. Sign-ins (failed ones
//! too), approvals, rejections, API keys, users, passwords and tool changes each leave one
//! [`AuditEvent`] in an append-only log that only admins read (`GET /v1/audit`).
//!
//! An operation's own trail (`operation_events`) says what happened to the operation; this log
//! says what people did across the whole server, including actions on no operation at all.
//!
//! Adapters record after the action succeeded:
//!
//! ```ignore
//! state.audit.record(PersonAction {
//!     actor: person_actor(&person.0.username),
//!     address,
//!     action: actions::OPERATION_RESOLVED,
//!     subject: format!("operation:{id}"),
//!     detail: json!({ "outcome": "succeeded", "reason": reason }),
//! }).await;
//! ```

mod log;
mod store;

pub use log::{actions, person_actor, AuditLog, PersonAction};
pub use store::{AuditEvent, AuditStore};
