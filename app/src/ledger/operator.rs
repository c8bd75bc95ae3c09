//! Settling operations that their lease holder could not: reconciliation (now, or by the
//! background reconciler) and a person's manual interventions, `resolve` and `expire`.

use uuid::Uuid;

use super::error::LedgerError;
use super::model::Operation;
use super::service::{committed, Ledger};
use super::settle::{Resolution, SettleRefused, Settlement};
use crate::domain::{ExecutorConfig, OperationStatus};

/// Who the background reconciler is in the audit trail.
pub const RECONCILER_ACTOR: &str = "system:reconciler";

/// What one round of the background reconciler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileRound {
    /// Operations the provider's answer settled.
    pub settled: usize,
    /// Lookups that failed; those operations are asked about again later.
    pub failed: usize,
}

impl Ledger {
    /// Asks the provider about an `unknown` operation now and settles it by the answer
    /// (`POST /v1/operations/{id}/reconcile`).
    #[tracing::instrument(skip_all, fields(operation = %id, actor = %actor))]
    pub async fn reconcile_now(&self, id: Uuid, actor: &str) -> Result<Operation, LedgerError> {
        let operation = self.operation(None, id).await?;
        if operation.status != OperationStatus::Unknown {
            let status = operation.status;
            return Err(SettleRefused::NotUnknown { status }.into());
        }
        let executor = self.reconcile_target(&operation).await?;
        self.reconcile(&operation, &executor, actor).await
    }

    /// One round of the background reconciler: up to `limit` due `unknown` operations of tools
    /// with a `reconcile_url`, held so no other reconciler asks about them at the same time.
    pub async fn reconcile_due(&self, limit: u32) -> Result<ReconcileRound, LedgerError> {
        let tools: Vec<_> = self
            .store
            .tools()
            .await?
            .into_iter()
            .filter_map(|tool| {
                let executor = tool.policy.executor?;
                executor
                    .reconcile_url
                    .is_some()
                    .then_some((tool.name, executor))
            })
            .collect();
        // The executor's timeout is how long the call that left an operation unknown may
        // still be on its way to the provider: asking before then could miss it.
        let targets: Vec<_> = tools
            .iter()
            .map(|(name, executor)| (name.clone(), executor.timeout_ms))
            .collect();
        // Longer than any lookup can take, so the hold outlives the work it protects.
        let longest_ms = tools.iter().map(|(_, e)| e.timeout_ms).max().unwrap_or(0);
        let hold_seconds = 2 * longest_ms / 1000 + 5;
        let due = self
            .store
            .take_due_reconciliations(&targets, limit, hold_seconds)
            .await?;
        let mut round = ReconcileRound::default();
        for operation in due {
            let Some((_, executor)) = tools.iter().find(|(name, _)| *name == operation.tool) else {
                continue;
            };
            match self.reconcile(&operation, executor, RECONCILER_ACTOR).await {
                Ok(_) => round.settled += 1,
                Err(LedgerError::SettleRefused(SettleRefused::ProviderUnavailable { .. })) => {
                    round.failed += 1;
                }
                // Settled by someone else meanwhile: nothing left to do.
                Err(LedgerError::SettleRefused(_)) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(round)
    }

    /// A person settles a `pending` or `unknown` operation by hand.
    #[tracing::instrument(skip_all, fields(operation = %id, actor = %username))]
    pub async fn resolve(
        &self,
        id: Uuid,
        resolution: Resolution,
        username: &str,
    ) -> Result<Operation, LedgerError> {
        self.settle(id, Settlement::Resolve(resolution), &person(username))
            .await
    }

    /// A person ends the key's life now: the next claim with it starts a new operation.
    #[tracing::instrument(skip_all, fields(operation = %id, actor = %username))]
    pub async fn expire(
        &self,
        id: Uuid,
        reason: String,
        username: &str,
    ) -> Result<Operation, LedgerError> {
        self.settle(id, Settlement::Expire { reason }, &person(username))
            .await
    }

    pub(super) async fn settle(
        &self,
        id: Uuid,
        settlement: Settlement,
        actor: &str,
    ) -> Result<Operation, LedgerError> {
        let decision = self
            .store
            .settle(id, &settlement, actor)
            .await?
            .ok_or(LedgerError::NotFound)?;
        // Reconciliations (found, not found, failed lookups) and manual interventions.
        self.telemetry.events_committed(committed(&decision));
        Ok(decision.outcome?)
    }

    /// The executor to ask about the operation's key.
    async fn reconcile_target(&self, operation: &Operation) -> Result<ExecutorConfig, LedgerError> {
        let (_, policy, _) = self.tool(operation.tool.as_str()).await?;
        policy
            .executor
            .filter(|executor| executor.reconcile_url.is_some())
            .ok_or_else(|| LedgerError::NotReconcilable {
                tool: operation.tool.to_string(),
            })
    }

    /// Asks the provider (outside any transaction: the call may take seconds) and settles.
    async fn reconcile(
        &self,
        operation: &Operation,
        executor: &ExecutorConfig,
        actor: &str,
    ) -> Result<Operation, LedgerError> {
        let lookup = self
            .provider()?
            .lookup(executor, &operation.provider_key)
            .await;
        self.settle(operation.id, Settlement::Reconcile(lookup), actor)
            .await
    }
}

fn person(username: &str) -> String {
    format!("user:{username}")
}
