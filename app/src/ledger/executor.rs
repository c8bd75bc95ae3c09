//! `invoke`: the ledger runs the tool itself. It claims the key like an agent would, calls the
//! tool's executor through the [`Provider`](super::Provider), and records what came back; a
//! timeout or a dropped connection leaves the operation `unknown` for reconciliation.

use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

use super::claim::{Claim, Fresh};
use super::complete::{Report, ReportRefused};
use super::error::LedgerError;
use super::failpoint;
use super::model::{ClaimRequest, Lease, Operation, Runner};
use super::provider::Execution;
use super::sent_claim::SentClaim;
use super::service::{committed, Ledger};
use super::settle::Settlement;
use crate::domain::{ExecutorConfig, Guarantee, Namespace, ToolPolicy};

/// Who runs tools for `invoke` in the audit trail.
pub const EXECUTOR_ACTOR: &str = "system:executor";

/// Pauses between idem's own retries of a call whose repetition is harmless (the tool is
/// idempotent or its provider dedupes by key); after them the outcome stays as it is.
const RETRY_PAUSES: [Duration; 2] = [Duration::from_millis(200), Duration::from_millis(1000)];

/// What an `invoke` came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Invoked {
    /// idem ran the tool now; the operation holds the outcome (`succeeded`, `failed`, or
    /// `unknown` when nobody can tell).
    Executed(Operation),
    /// idem did not run it; the claim says why (a replay, a duplicate in flight, an unknown
    /// outcome, a wait for approval, a key reused with other arguments).
    Answered(Claim),
}

impl Ledger {
    /// Claims the key for idem and, if the claim starts an attempt, runs the tool's executor.
    #[tracing::instrument(skip_all, fields(namespace = %namespace, tool = %request.tool))]
    pub async fn invoke(
        &self,
        namespace: &Namespace,
        actor: &str,
        mut request: SentClaim,
        wait: Option<Duration>,
    ) -> Result<Invoked, LedgerError> {
        let (_, policy, _) = self.tool(&request.tool).await?;
        let Some(executor) = policy.executor.clone() else {
            return Err(LedgerError::Invalid {
                code: "tool_not_executable",
                message: format!(
                    "the tool {} has no executor; register executor.url with PUT /v1/tools/{{name}}, or claim with POST /v1/operations and run it yourself",
                    request.tool
                ),
            });
        };
        request.runner = Runner::Idem;
        let args = request.args.clone();
        let claim = match wait {
            Some(wait) => self.claim_waiting(namespace, actor, request, wait).await?,
            None => self.claim(namespace, actor, request).await?,
        };
        let Claim::Started { operation, lease } = claim else {
            return Ok(Invoked::Answered(claim));
        };
        let operation = self
            .execute_detached(operation, lease, executor, policy, args)
            .await?;
        Ok(Invoked::Executed(operation))
    }

    /// Runs the call in its own task, so that it ends and is recorded even if the client that
    /// asked for it goes away (an abandoned call would leave the operation pending until its
    /// lease ran out).
    async fn execute_detached(
        &self,
        operation: Operation,
        lease: Lease,
        executor: ExecutorConfig,
        policy: ToolPolicy,
        args: Value,
    ) -> Result<Operation, LedgerError> {
        let ledger = self.clone();
        let task = tokio::spawn(async move {
            ledger
                .execute(operation, lease, &executor, &policy, &args)
                .await
        });
        task.await.unwrap_or_else(|joined| {
            Err(LedgerError::Internal(format!(
                "the executor task failed: {joined}"
            )))
        })
    }

    async fn execute(
        &self,
        operation: Operation,
        lease: Lease,
        executor: &ExecutorConfig,
        policy: &ToolPolicy,
        args: &Value,
    ) -> Result<Operation, LedgerError> {
        let provider = self.provider()?.clone();
        let provider_key = operation.provider_key.as_str();
        let mut execution = provider.execute(executor, provider_key, args).await;
        if matches!(
            policy.guarantee(),
            Guarantee::Repeatable | Guarantee::ExactlyOnce
        ) {
            for pause in RETRY_PAUSES {
                if !worth_retrying(&execution) {
                    break;
                }
                tokio::time::sleep(pause).await;
                execution = provider.execute(executor, provider_key, args).await;
            }
        }
        failpoint::pause_if_armed("invoke_after_execute").await;
        self.record(&operation, &lease, execution).await
    }

    /// Records what the call came to under the lease; when the lease ran out meanwhile (a slow
    /// provider) and the operation became `unknown`, the answer settles it all the same.
    async fn record(
        &self,
        operation: &Operation,
        lease: &Lease,
        execution: Execution,
    ) -> Result<Operation, LedgerError> {
        let report = report_of(&execution);
        let recorded = self
            .store
            .report(
                &operation.namespace,
                operation.id,
                &lease.token,
                &report,
                EXECUTOR_ACTOR,
            )
            .await?
            .ok_or(LedgerError::NotFound)?;
        // A call that timed out marks the operation `unknown`.
        self.telemetry.events_committed(committed(&recorded));
        match recorded.outcome {
            Ok(operation) => Ok(operation),
            Err(ReportRefused::LeaseLost) => {
                let late = Settlement::LateExecution(execution);
                match self.settle(operation.id, late, EXECUTOR_ACTOR).await {
                    Err(LedgerError::SettleRefused(_)) => self.operation(None, operation.id).await,
                    other => other,
                }
            }
            Err(refused) => Err(refused.into()),
        }
    }

    /// After approval, an operation that idem runs (`invoke`) is run right away, unless some
    /// of its arguments were redacted when stored: then idem cannot send them, and waits for
    /// the agent's next `invoke` with the same arguments.
    pub(super) fn run_approved_in_background(&self, operation: Operation) {
        let ledger = self.clone();
        tokio::spawn(async move {
            let id = operation.id;
            if let Err(error) = ledger.run_approved(operation).await {
                tracing::warn!(operation = %id, %error, "running an approved operation failed");
            }
        });
    }

    async fn run_approved(&self, operation: Operation) -> Result<(), LedgerError> {
        if holds_redactions(&operation.args) {
            tracing::info!(operation = %operation.id, "approved; some arguments are redacted, so the agent's next invoke runs it");
            return Ok(());
        }
        let (_, policy, _) = self.tool(operation.tool.as_str()).await?;
        let Some(executor) = policy.executor.clone() else {
            return Ok(());
        };
        let request = ClaimRequest {
            namespace: operation.namespace.clone(),
            key: operation.key.clone(),
            key_source: operation.key_source,
            tool: operation.tool.clone(),
            policy: policy.clone(),
            fingerprint: operation.fingerprint.clone(),
            args: operation.args.clone(),
            run_id: operation.run_id.clone(),
            step: operation.step,
            runner: Runner::Idem,
        };
        let fresh = Fresh {
            operation_id: Uuid::now_v7(),
            lease_token: crate::identity::random_token(),
        };
        let decision = self.store.claim(&request, EXECUTOR_ACTOR, fresh).await?;
        // Someone else (the agent's waiting invoke) may have taken the lease first: then
        // they run it, and this does nothing.
        if let Claim::Started { operation, lease } = decision.outcome {
            self.execute(operation, lease, &executor, &policy, &request.args)
                .await?;
        }
        Ok(())
    }
}

/// A repeat may help: the provider asked us to come back, or nobody knows what happened.
fn worth_retrying(execution: &Execution) -> bool {
    matches!(
        execution,
        Execution::Unknown { .. }
            | Execution::Failed {
                retryable: true,
                ..
            }
    )
}

fn report_of(execution: &Execution) -> Report {
    match execution.clone() {
        Execution::Succeeded {
            result,
            provider_ref,
        } => Report::Completed {
            succeeded: true,
            result: Some(result),
            error: None,
            retryable: false,
            provider_ref,
        },
        Execution::Failed { error, retryable } => Report::Completed {
            succeeded: false,
            result: None,
            error: Some(error),
            retryable,
            provider_ref: None,
        },
        Execution::Unknown { error } => Report::Unknown { error: Some(error) },
    }
}

/// Whether redaction replaced any value (so the stored arguments are not the real ones).
fn holds_redactions(value: &Value) -> bool {
    match value {
        Value::String(text) => text == crate::domain::REDACTED,
        Value::Array(items) => items.iter().any(holds_redactions),
        Value::Object(fields) => fields.values().any(holds_redactions),
        _ => false,
    }
}
