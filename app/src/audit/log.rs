//! The audit service: turns a person's action into an [`AuditEvent`] and appends it.

use chrono::{DurationRound, TimeDelta, Utc};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::Arc;
use uuid::Uuid;

use super::{AuditEvent, AuditStore};
use crate::domain::{redact, UserInfo, Username};
use crate::identity::IdentityError;
use crate::store_error::StoreError;

/// The actions recorded so far, so that every adapter spells them alike.
pub mod actions {
    pub const LOGIN_SUCCEEDED: &str = "login.succeeded";
    pub const LOGIN_FAILED: &str = "login.failed";
    pub const OPERATION_APPROVED: &str = "operation.approved";
    pub const OPERATION_REJECTED: &str = "operation.rejected";
    pub const OPERATION_RESOLVED: &str = "operation.resolved";
    pub const OPERATION_EXPIRED: &str = "operation.expired";
    pub const OPERATION_RECONCILED: &str = "operation.reconciled";
    pub const API_KEY_CREATED: &str = "api_key.created";
    pub const API_KEY_REVOKED: &str = "api_key.revoked";
    pub const USER_CREATED: &str = "user.created";
    pub const PASSWORD_CHANGED: &str = "user.password_changed";
    pub const USER_DISABLED: &str = "user.disabled";
    pub const USER_ENABLED: &str = "user.enabled";
    pub const USER_ROLE_CHANGED: &str = "user.role_changed";
    pub const USER_DELETED: &str = "user.deleted";
    pub const TOOL_REGISTERED: &str = "tool.registered";
}

/// How a signed-in person appears as an actor: `user:<username>`, as in operation events.
pub fn person_actor(username: &Username) -> String {
    format!("user:{username}")
}

/// What a person (or the command line, or the system) did, as an adapter reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonAction {
    /// `user:<username>` (see [`person_actor`]), `anonymous`, `cli` or `system`.
    pub actor: String,
    /// Where the request came from; `None` for the command line and the system.
    pub address: Option<IpAddr>,
    /// One of [`actions`] (or a new `<thing>.<what happened>`).
    pub action: &'static str,
    /// What was acted on: `operation:<id>`, `user:<name>`, `api_key:<id>`, `tool:<name>`.
    pub subject: String,
    /// Further facts; redacted before it is stored, so a secret put here by mistake is not
    /// kept, but put none here on purpose.
    pub detail: Value,
}

/// A name someone typed at sign-in is kept to this many characters: enough for any real
/// username, and it bounds what a stranger can write into the log.
const MAX_TRIED_NAME_CHARS: usize = 64;

/// Records people's actions over an [`AuditStore`]. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    store: Arc<dyn AuditStore>,
}

impl AuditLog {
    /// The service over a store.
    pub fn new(store: Arc<dyn AuditStore>) -> Self {
        Self { store }
    }

    /// Appends the action to the log. Called after the action succeeded, so it never fails
    /// the caller: should the database refuse the write, the event goes to the error log
    /// instead (with everything but its detail) and the request is answered as usual.
    #[tracing::instrument(skip_all, fields(action = action.action))]
    pub async fn record(&self, action: PersonAction) {
        let event = AuditEvent {
            id: Uuid::now_v7(),
            // Microseconds: what both databases keep, so an event reads back as written.
            at: Utc::now()
                .duration_trunc(TimeDelta::microseconds(1))
                .unwrap_or_else(|_| Utc::now()),
            actor: action.actor,
            address: action.address.map(|ip| ip.to_string()),
            action: action.action.to_owned(),
            subject: action.subject,
            detail: redact(&action.detail, &[]),
        };
        if let Err(error) = self.store.append(&event).await {
            tracing::error!(
                %error,
                actor = %event.actor,
                address = event.address.as_deref().unwrap_or("-"),
                action = %event.action,
                subject = %event.subject,
                "could not write an audit event; this log line is its only record"
            );
        }
    }

    /// Records a sign-in attempt with the name that was tried: `login.succeeded`, or
    /// `login.failed` with the reason (`invalid_credentials`, `disabled` or `throttled`, the
    /// last with the count of refusals so far, at counts 1, 10, 100, …). Failures of the
    /// server itself are not sign-in attempts the person made, and are not recorded.
    pub async fn login(
        &self,
        username: &str,
        address: Option<IpAddr>,
        outcome: Result<&UserInfo, &IdentityError>,
    ) {
        let action = match outcome {
            Ok(user) => PersonAction {
                actor: person_actor(&user.username),
                address,
                action: actions::LOGIN_SUCCEEDED,
                subject: format!("user:{}", user.username),
                detail: json!({ "role": user.role }),
            },
            Err(error) => {
                let tried: String = username.chars().take(MAX_TRIED_NAME_CHARS).collect();
                let detail = match error {
                    IdentityError::InvalidCredentials => {
                        json!({ "username": tried, "reason": "invalid_credentials" })
                    }
                    IdentityError::AccountDisabled => {
                        json!({ "username": tried, "reason": "disabled" })
                    }
                    // Counted, not recorded one by one: a flood of refused guesses writes
                    // a row at the 1st, 10th, 100th, … refusal of a window, with the count.
                    IdentityError::Throttled { refused, .. } if is_power_of_ten(*refused) => {
                        json!({ "username": tried, "reason": "throttled", "refused": refused })
                    }
                    _ => return,
                };
                PersonAction {
                    actor: "anonymous".into(),
                    address,
                    action: actions::LOGIN_FAILED,
                    subject: format!("user:{tried}"),
                    detail,
                }
            }
        };
        self.record(action).await;
    }

    /// A page of events, newest first, after the cursor's event, and whether more follow.
    pub async fn page(
        &self,
        before: Option<Uuid>,
        limit: u32,
    ) -> Result<(Vec<AuditEvent>, bool), StoreError> {
        let mut events = self.store.newest(before, limit + 1).await?;
        let more = events.len() > limit as usize;
        events.truncate(limit as usize);
        Ok((events, more))
    }
}

/// Whether `n` is 1, 10, 100, …
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}
