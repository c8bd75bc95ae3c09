//! Telling the outside world that a person is needed: the ledger hands each new request for
//! approval to an [`ApprovalNotifier`] (the server's webhook worker, say) once it is committed.

use super::claim::Claim;
use super::model::{EventKind, Operation};
use super::write::Decision;

/// Told of every request for approval that this process created, right after the claim that
/// created it committed: never of a repeat, and never of one another process created (that
/// process tells its own). Called on the claim's path, so it must return at once; queue the
/// work, never do it here.
pub trait ApprovalNotifier: Send + Sync {
    /// A new operation now waits for a person.
    fn approval_requested(&self, operation: &Operation);
}

/// The operation this claim decision created in `awaiting_approval`, if it created one. Only
/// the claim whose transaction inserted the operation carries its `approval_requested` event;
/// repeats carry `blocked_awaiting_approval`.
pub fn newly_requested(decision: &Decision<Claim>) -> Option<&Operation> {
    let Claim::AwaitingApproval { operation } = &decision.outcome else {
        return None;
    };
    decision
        .events
        .iter()
        .any(|event| {
            event.kind == EventKind::ApprovalRequested && event.operation_id == operation.id
        })
        .then_some(operation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Effect, Fingerprint, IdempotencyKey, KeySource, Namespace, ToolName, ToolPolicy,
    };
    use crate::ledger::{decide_claim, ClaimRequest, Fresh};
    use chrono::Utc;
    use serde_json::json;
    use uuid::Uuid;

    fn waiting_request() -> ClaimRequest {
        let tool = ToolName::try_from("wire").unwrap();
        let args = json!({ "amount": 1 });
        let mut policy = ToolPolicy::default_for_unregistered();
        policy.effect = Effect::Irreversible;
        ClaimRequest {
            namespace: Namespace::try_from("treasury").unwrap(),
            key: IdempotencyKey::try_from("w-1").unwrap(),
            key_source: KeySource::Body,
            fingerprint: Fingerprint::compute(&tool, &args, &[]),
            tool,
            policy,
            args,
            run_id: None,
            step: None,
            runner: crate::ledger::Runner::Agent,
        }
    }

    fn fresh() -> Fresh {
        Fresh {
            operation_id: Uuid::now_v7(),
            lease_token: "t".into(),
        }
    }

    #[test]
    fn only_the_claim_that_created_the_request_announces_it() {
        let now = Utc::now();
        let created = decide_claim(None, &waiting_request(), "a", fresh(), now);
        let announced = newly_requested(&created).expect("a new request is announced");
        let Claim::AwaitingApproval { operation } = &created.outcome else {
            panic!("irreversible tools wait");
        };
        assert_eq!(announced.id, operation.id);

        let repeat = decide_claim(
            Some(operation.clone()),
            &waiting_request(),
            "a",
            fresh(),
            now,
        );
        assert!(matches!(repeat.outcome, Claim::AwaitingApproval { .. }));
        assert!(
            newly_requested(&repeat).is_none(),
            "a repeat is not announced"
        );

        let mut plain = waiting_request();
        plain.policy.effect = Effect::NonIdempotentWrite;
        let started = decide_claim(None, &plain, "a", fresh(), now);
        assert!(newly_requested(&started).is_none(), "nothing waits");
    }
}
