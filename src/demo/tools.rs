//! The demo's tools: one of every effect class, run by the in-process sandbox provider, so
//! every guarantee idem can keep shows up on the dashboard.

use app::audit::{actions, AuditLog};
use app::domain::{ApprovalPolicy, Effect, ExecutorConfig, ToolPolicy};
use app::ledger::{Ledger, LedgerError};
use serde_json::json;

/// Read-only: any number of calls is fine (`repeatable`).
pub const LOOKUP_ORDER: &str = "lookup_order";
/// An idempotent write whose provider dedupes by key (`exactly_once`).
pub const SEND_EMAIL: &str = "send_email";
/// A non-idempotent write: an ambiguous outcome waits as `unknown` for reconciliation
/// (`at_most_once`).
pub const REFUND: &str = "refund";
/// Irreversible: every call waits for a person (`at_most_once_approved`).
pub const DEPLOY: &str = "deploy";
/// A tool the agent runs itself (claim, act, complete): no executor.
pub const CREATE_TICKET: &str = "create_ticket";

/// How long idem waits for the refund provider; the demo's commit-then-timeout fault waits
/// longer than this, so the call ends `unknown` after the refund happened.
pub const REFUND_TIMEOUT_MS: u32 = 500;

/// Every demo tool with its policy, the executors pointing at the sandbox at `sandbox`
/// (`http://host:port`).
pub fn catalogue(sandbox: &str) -> Vec<(&'static str, ToolPolicy)> {
    let executor = |name: &str, timeout_ms: u32, provider_dedupes: bool| ExecutorConfig {
        url: format!("{sandbox}/actions/{name}"),
        reconcile_url: Some(format!("{sandbox}/actions/{name}/lookup")),
        timeout_ms,
        provider_dedupes,
    };
    let base = ToolPolicy::default_for_unregistered();
    vec![
        (
            LOOKUP_ORDER,
            ToolPolicy {
                effect: Effect::ReadOnly,
                ttl_seconds: 3600,
                executor: Some(executor(LOOKUP_ORDER, 2000, true)),
                ..base.clone()
            },
        ),
        (
            SEND_EMAIL,
            ToolPolicy {
                effect: Effect::IdempotentWrite,
                key_fields: vec!["message_id".into()],
                ignore_fields: vec!["trace_id".into()],
                executor: Some(executor(SEND_EMAIL, 2000, true)),
                ..base.clone()
            },
        ),
        (
            REFUND,
            ToolPolicy {
                effect: Effect::NonIdempotentWrite,
                redact_fields: vec!["customer.email".into()],
                executor: Some(executor(REFUND, REFUND_TIMEOUT_MS, false)),
                ..base.clone()
            },
        ),
        (
            DEPLOY,
            ToolPolicy {
                effect: Effect::Irreversible,
                approval: ApprovalPolicy::Auto,
                // Long enough for a person to look, short enough that an unattended demo
                // does not keep requests from days ago.
                approval_ttl_seconds: 3600,
                executor: Some(executor(DEPLOY, 5000, false)),
                ..base.clone()
            },
        ),
        (
            CREATE_TICKET,
            ToolPolicy {
                effect: Effect::NonIdempotentWrite,
                lease_seconds: 30,
                ..base
            },
        ),
    ]
}

/// Registers (or re-registers, with this run's sandbox address) every demo tool, through
/// the ledger's registry and with an audit entry, as `PUT /v1/tools/{name}` does.
pub async fn register(ledger: &Ledger, audit: &AuditLog, sandbox: &str) -> Result<(), LedgerError> {
    for (name, policy) in catalogue(sandbox) {
        let tool = ledger.put_tool(name, policy).await?;
        let subject = format!("tool:{}", tool.name);
        let detail = json!({ "policy": tool.policy, "demo": true });
        super::record(audit, actions::TOOL_REGISTERED, subject, detail).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_effect_class_is_in_the_catalogue_and_every_policy_is_valid() {
        let tools = catalogue("http://127.0.0.1:4000");
        for effect in [
            Effect::ReadOnly,
            Effect::IdempotentWrite,
            Effect::NonIdempotentWrite,
            Effect::Irreversible,
        ] {
            assert!(tools.iter().any(|(_, policy)| policy.effect == effect));
        }
        for (name, policy) in &tools {
            assert!(policy.validate().is_ok(), "{name}");
        }
    }
}
