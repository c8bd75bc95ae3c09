//! The tool registry for the UI: everyone signed in reads it, admins register and edit tools
//! through the same path as `PUT /v1/tools/{name}`.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::domain::{ApprovalPolicy, Effect, ExecutorConfig, Guarantee, ToolPolicy};
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{admin_actions, answer_with_status, ledger, person_who_may};
#[cfg(feature = "ssr")]
use crate::domain::Permission;

/// A registered tool as the tools page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub policy: ToolPolicy,
    pub guarantee: Guarantee,
    pub updated_at: DateTime<Utc>,
}

/// A tool registration as an admin types it: numbers and lists are text until the server
/// reads them, so a typo comes back as a message rather than a decoding failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolForm {
    pub name: String,
    /// `read_only`, `idempotent_write`, `non_idempotent_write` or `irreversible`.
    pub effect: String,
    /// `auto` or `always`.
    pub approval: String,
    pub ttl_seconds: String,
    pub lease_seconds: String,
    pub approval_ttl_seconds: String,
    /// Comma-separated dotted paths.
    pub key_fields: String,
    pub ignore_fields: String,
    pub redact_fields: String,
    /// Empty: idem does not call the tool itself.
    pub executor_url: String,
    pub reconcile_url: String,
    pub timeout_ms: String,
    pub provider_dedupes: bool,
}

impl ToolForm {
    /// The form filled with a tool's current registration, for editing it.
    pub fn of(name: &str, policy: &ToolPolicy) -> Self {
        let executor = policy.executor.as_ref();
        Self {
            name: name.to_owned(),
            effect: policy.effect.as_str().to_owned(),
            approval: approval_name(policy.approval).to_owned(),
            ttl_seconds: policy.ttl_seconds.to_string(),
            lease_seconds: policy.lease_seconds.to_string(),
            approval_ttl_seconds: policy.approval_ttl_seconds.to_string(),
            key_fields: policy.key_fields.join(", "),
            ignore_fields: policy.ignore_fields.join(", "),
            redact_fields: policy.redact_fields.join(", "),
            executor_url: executor.map(|e| e.url.clone()).unwrap_or_default(),
            reconcile_url: executor
                .and_then(|e| e.reconcile_url.clone())
                .unwrap_or_default(),
            timeout_ms: executor
                .map(|e| e.timeout_ms.to_string())
                .unwrap_or_default(),
            provider_dedupes: executor.is_some_and(|e| e.provider_dedupes),
        }
    }

    /// An empty form with the defaults an unregistered tool gets.
    pub fn blank() -> Self {
        Self::of("", &ToolPolicy::default_for_unregistered())
    }

    /// The policy the form describes; the message says which field is wrong. The ledger
    /// checks the policy itself afterwards (paths, limits), as for REST.
    pub fn policy(&self) -> Result<ToolPolicy, String> {
        let defaults = ToolPolicy::default_for_unregistered();
        let executor = match self.executor_url.trim() {
            "" => None,
            url => Some(ExecutorConfig {
                url: url.to_owned(),
                reconcile_url: Some(self.reconcile_url.trim().to_owned()).filter(|u| !u.is_empty()),
                timeout_ms: number_or("timeout_ms", &self.timeout_ms, 5_000)?,
                provider_dedupes: self.provider_dedupes,
            }),
        };
        Ok(ToolPolicy {
            effect: named("effect", &self.effect)?,
            approval: named("approval", &self.approval)?,
            ttl_seconds: number_or("ttl_seconds", &self.ttl_seconds, defaults.ttl_seconds)?,
            lease_seconds: number_or("lease_seconds", &self.lease_seconds, defaults.lease_seconds)?,
            approval_ttl_seconds: number_or(
                "approval_ttl_seconds",
                &self.approval_ttl_seconds,
                defaults.approval_ttl_seconds,
            )?,
            key_fields: paths(&self.key_fields),
            ignore_fields: paths(&self.ignore_fields),
            redact_fields: paths(&self.redact_fields),
            executor,
        })
    }
}

/// The name of a guarantee as the API writes it.
pub fn guarantee_name(guarantee: Guarantee) -> &'static str {
    match guarantee {
        Guarantee::Repeatable => "repeatable",
        Guarantee::ExactlyOnce => "exactly_once",
        Guarantee::AtMostOnce => "at_most_once",
        Guarantee::AtMostOnceApproved => "at_most_once_approved",
    }
}

/// The name of an approval policy as the API writes it.
pub fn approval_name(approval: ApprovalPolicy) -> &'static str {
    match approval {
        ApprovalPolicy::Auto => "auto",
        ApprovalPolicy::Always => "always",
    }
}

/// Every effect, for the form's select.
pub const EFFECTS: [Effect; 4] = [
    Effect::ReadOnly,
    Effect::IdempotentWrite,
    Effect::NonIdempotentWrite,
    Effect::Irreversible,
];

fn named<T: serde::de::DeserializeOwned>(field: &str, text: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.trim().to_owned()))
        .map_err(|_| format!("{field}: unknown value {:?}", text.trim()))
}

fn number_or(field: &str, text: &str, default: u32) -> Result<u32, String> {
    match text.trim() {
        "" => Ok(default),
        digits => digits
            .parse()
            .map_err(|_| format!("{field} must be a whole number of at least 0")),
    }
}

fn paths(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every registered tool.
#[server(prefix = "/api", endpoint = "tools")]
pub async fn list_tools() -> Result<Vec<ToolView>, UiError> {
    let ledger = ledger()?;
    let person = person_who_may(Permission::Read).await?;
    let tools = ledger.tools().await.map_err(answer_with_status)?;
    let admin = person.role.can(Permission::Administer);
    Ok(tools
        .into_iter()
        .map(|mut tool| {
            // Executor URLs may carry credentials: whole for admins, their origin for others.
            if !admin {
                tool.policy = tool.policy.without_credentials();
            }
            view(tool)
        })
        .collect())
}

/// Registers a tool or replaces its policy (admins only), audited as `tool.registered`.
#[server(prefix = "/api", endpoint = "register_tool")]
pub async fn register_tool(form: ToolForm) -> Result<ToolView, UiError> {
    let by = super::context::acting(Permission::Administer).await?;
    let policy = form
        .policy()
        .map_err(|message| answer_with_status(UiError::Invalid(message)))?;
    let tool = admin_actions()?
        .register_tool(&by, form.name.trim(), policy)
        .await
        .map_err(answer_with_status)?;
    Ok(view(tool))
}

#[cfg(feature = "ssr")]
fn view(tool: crate::ledger::RegisteredTool) -> ToolView {
    ToolView {
        guarantee: tool.policy.guarantee(),
        name: tool.name.to_string(),
        policy: tool.policy,
        updated_at: tool.updated_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_reads_back_as_the_policy_it_was_filled_with() {
        let policy = ToolPolicy {
            effect: Effect::Irreversible,
            approval: ApprovalPolicy::Always,
            ttl_seconds: 60,
            lease_seconds: 5,
            approval_ttl_seconds: 600,
            key_fields: vec!["order.id".into(), "amount".into()],
            ignore_fields: vec!["trace".into()],
            redact_fields: vec!["card.number".into()],
            executor: Some(ExecutorConfig {
                url: "http://x/actions/a".into(),
                reconcile_url: None,
                timeout_ms: 1_000,
                provider_dedupes: true,
            }),
        };
        assert_eq!(ToolForm::of("t", &policy).policy(), Ok(policy));
    }

    #[test]
    fn blank_fields_take_defaults_and_typos_are_named() {
        let mut form = ToolForm::blank();
        form.ttl_seconds = " ".into();
        assert_eq!(form.policy(), Ok(ToolPolicy::default_for_unregistered()));
        form.lease_seconds = "ten".into();
        assert_eq!(
            form.policy().unwrap_err(),
            "lease_seconds must be a whole number of at least 0"
        );
        form.lease_seconds.clear();
        form.effect = "explosive".into();
        assert!(form.policy().unwrap_err().starts_with("effect:"));
    }
}
