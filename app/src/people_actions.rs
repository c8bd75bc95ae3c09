//! What people do to operations: approve, reject, reconcile, resolve and expire. Each is
//! checked (a reason where the audit needs one), done through the ledger, and recorded in the
//! audit of people with who, from where and why. The REST handlers and the UI's server
//! functions both come through here, so the two doors leave the same trail.

use serde_json::{json, Value};
use std::net::IpAddr;
use uuid::Uuid;

use crate::audit::{actions, person_actor, AuditLog, PersonAction};
use crate::domain::{Outcome, UserInfo};
use crate::ledger::{Ledger, LedgerError, Operation, Resolution, Verdict};

/// A reason is kept to this many characters.
pub const MAX_REASON_CHARS: usize = 1000;

/// Who acts, and from which address (`None` when the adapter cannot tell).
#[derive(Debug, Clone)]
pub struct Acting {
    pub person: UserInfo,
    pub address: Option<IpAddr>,
}

/// A manual settlement as a person asks for it.
#[derive(Debug, Clone)]
pub struct ResolveRequest {
    pub outcome: Outcome,
    pub result: Option<Value>,
    /// For `failed`: `{"code", "message"}`.
    pub error: Option<Value>,
    /// For `failed`: whether the next claim may run the action again.
    pub retryable: bool,
    pub reason: Option<String>,
}

/// Why a person's action was refused before anything changed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// `missing_reason`: the audit trail (and the agent) must be told why.
    #[error("{0}")]
    MissingReason(&'static str),
    /// `invalid_request`: the input is malformed.
    #[error("{0}")]
    Invalid(&'static str),
    /// The ledger refused or failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// People's actions on operations. Cheap to clone.
#[derive(Clone)]
pub struct PeopleActions {
    ledger: Ledger,
    audit: AuditLog,
}

impl PeopleActions {
    pub fn new(ledger: Ledger, audit: AuditLog) -> Self {
        Self { ledger, audit }
    }

    /// Approves an operation that waits for approval; the reason is optional.
    pub async fn approve(
        &self,
        by: &Acting,
        id: Uuid,
        reason: Option<String>,
    ) -> Result<Operation, ActionError> {
        let reason = optional_reason(reason)?;
        self.decide(by, id, Verdict::Approve { reason }).await
    }

    /// Rejects an operation that waits for approval; the agent is told the reason.
    pub async fn reject(
        &self,
        by: &Acting,
        id: Uuid,
        reason: Option<String>,
    ) -> Result<Operation, ActionError> {
        let reason = required_reason(reason, "a rejection needs a reason: the agent is told it")?;
        self.decide(by, id, Verdict::Reject { reason }).await
    }

    /// Asks the provider about an `unknown` operation now and settles it.
    pub async fn reconcile(&self, by: &Acting, id: Uuid) -> Result<Operation, ActionError> {
        let actor = person_actor(&by.person.username);
        let operation = self.ledger.reconcile_now(id, &actor).await?;
        self.record(by, actions::OPERATION_RECONCILED, &operation, json!({}))
            .await;
        Ok(operation)
    }

    /// Settles a `pending` or `unknown` operation by hand.
    pub async fn resolve(
        &self,
        by: &Acting,
        id: Uuid,
        request: ResolveRequest,
    ) -> Result<Operation, ActionError> {
        if request.error.as_ref().is_some_and(|e| !e.is_object()) {
            return Err(ActionError::Invalid(
                "error must be an object {\"code\", \"message\"}",
            ));
        }
        let resolution = Resolution {
            outcome: request.outcome,
            result: request.result,
            error: request.error,
            retryable: request.retryable && request.outcome == Outcome::Failed,
            reason: required_reason(request.reason, INTERVENTION_REASON)?,
        };
        let detail = json!({ "reason": resolution.reason, "outcome": resolution.outcome });
        let operation = self
            .ledger
            .resolve(id, resolution, by.person.username.as_str())
            .await?;
        self.record(by, actions::OPERATION_RESOLVED, &operation, detail)
            .await;
        Ok(operation)
    }

    /// Ends the key's life now, so the next claim with it starts a new operation.
    pub async fn expire(
        &self,
        by: &Acting,
        id: Uuid,
        reason: Option<String>,
    ) -> Result<Operation, ActionError> {
        let reason = required_reason(reason, INTERVENTION_REASON)?;
        let detail = json!({ "reason": reason });
        let operation = self
            .ledger
            .expire(id, reason, by.person.username.as_str())
            .await?;
        self.record(by, actions::OPERATION_EXPIRED, &operation, detail)
            .await;
        Ok(operation)
    }

    async fn decide(
        &self,
        by: &Acting,
        id: Uuid,
        verdict: Verdict,
    ) -> Result<Operation, ActionError> {
        let (action, reason) = match &verdict {
            Verdict::Approve { reason } => (actions::OPERATION_APPROVED, reason.clone()),
            Verdict::Reject { reason } => (actions::OPERATION_REJECTED, Some(reason.clone())),
        };
        let operation = self
            .ledger
            .decide(id, verdict, by.person.username.as_str())
            .await?;
        let detail = json!({ "reason": reason, "fingerprint": operation.fingerprint });
        self.record(by, action, &operation, detail).await;
        Ok(operation)
    }

    /// Records the action in the audit of people, with what it was done to.
    async fn record(
        &self,
        by: &Acting,
        action: &'static str,
        operation: &Operation,
        mut detail: Value,
    ) {
        detail["namespace"] = json!(operation.namespace);
        detail["tool"] = json!(operation.tool);
        detail["key"] = json!(operation.key);
        detail["status"] = json!(operation.status);
        self.audit
            .record(PersonAction {
                actor: person_actor(&by.person.username),
                address: by.address,
                action,
                subject: format!("operation:{}", operation.id),
                detail,
            })
            .await;
    }
}

const INTERVENTION_REASON: &str =
    "a manual intervention needs a reason: it is recorded in the audit trail";

fn optional_reason(reason: Option<String>) -> Result<Option<String>, ActionError> {
    let reason = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(ActionError::Invalid(
            "reason is longer than 1000 characters",
        ));
    }
    Ok(reason)
}

fn required_reason(reason: Option<String>, why: &'static str) -> Result<String, ActionError> {
    optional_reason(reason)?.ok_or(ActionError::MissingReason(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_trimmed_and_bounded() {
        assert_eq!(
            optional_reason(Some("  ok ".into())).unwrap(),
            Some("ok".into())
        );
        assert_eq!(optional_reason(Some("   ".into())).unwrap(), None);
        assert!(matches!(
            optional_reason(Some("x".repeat(MAX_REASON_CHARS + 1))),
            Err(ActionError::Invalid(_))
        ));
        assert!(matches!(
            required_reason(Some(" ".into()), "why"),
            Err(ActionError::MissingReason("why"))
        ));
        assert_eq!(
            required_reason(Some("because".into()), "why").unwrap(),
            "because"
        );
    }
}
