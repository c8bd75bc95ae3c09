//! `idem tools import-mcp`: registers an MCP server's tools in idem's registry, their effect
//! seeded from the tools' annotations. Annotations are the server's word, which the protocol
//! says not to trust; from then on the registry decides, and an admin can change it. A tool
//! already registered is never overwritten.

use app::domain::{Effect, ToolName, ToolPolicy};
use rmcp::model::Tool;

/// The effect an MCP tool's annotations suggest.
///
/// `readOnlyHint` → read_only; `idempotentHint` → idempotent_write; `destructiveHint: false`
/// → non_idempotent_write; destructive or unannotated (the protocol's defaults) →
/// irreversible, so a person approves each call until an admin says otherwise.
pub fn effect_from_annotations(tool: &Tool) -> Effect {
    let Some(hints) = &tool.annotations else {
        return Effect::Irreversible;
    };
    if hints.read_only_hint == Some(true) {
        Effect::ReadOnly
    } else if hints.idempotent_hint == Some(true) {
        Effect::IdempotentWrite
    } else if hints.destructive_hint == Some(false) {
        Effect::NonIdempotentWrite
    } else {
        Effect::Irreversible
    }
}

/// What the import did (or, with `--dry-run`, would do) with one tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Register(Effect),
    AlreadyRegistered(Effect),
    InvalidName,
}

/// One row of the printed table.
#[derive(Debug, Clone)]
pub struct Row {
    pub tool: String,
    pub decision: Decision,
}

/// Decides each tool against the registry, registering the new ones unless `dry_run`.
pub async fn import(
    store: &dyn app::ledger::LedgerStore,
    tools: &[Tool],
    dry_run: bool,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for tool in tools {
        let decision = match ToolName::try_from(tool.name.as_ref()) {
            Err(_) => Decision::InvalidName,
            Ok(name) => match store.tool(&name).await? {
                Some(policy) => Decision::AlreadyRegistered(policy.effect),
                None => {
                    let effect = effect_from_annotations(tool);
                    if !dry_run {
                        let policy = ToolPolicy {
                            effect,
                            ..ToolPolicy::default()
                        };
                        store.put_tool(&name, &policy).await?;
                    }
                    Decision::Register(effect)
                }
            },
        };
        rows.push(Row {
            tool: tool.name.to_string(),
            decision,
        });
    }
    Ok(rows)
}

/// The table printed on stdout: tool, annotations, effect, what happened.
pub fn table(tools: &[Tool], rows: &[Row], dry_run: bool) -> String {
    let mut out = format!(
        "{:<32} {:<40} {:<22} action\n",
        "tool", "annotations", "effect"
    );
    for (tool, row) in tools.iter().zip(rows) {
        let (effect, action) = match &row.decision {
            Decision::Register(e) if dry_run => (e.as_str(), "would register"),
            Decision::Register(e) => (e.as_str(), "registered"),
            Decision::AlreadyRegistered(e) => (e.as_str(), "kept (already registered)"),
            Decision::InvalidName => ("-", "skipped (not a valid idem tool name)"),
        };
        out.push_str(&format!(
            "{:<32} {:<40} {:<22} {action}\n",
            row.tool,
            annotations(tool),
            effect
        ));
    }
    out
}

fn annotations(tool: &Tool) -> String {
    let Some(hints) = &tool.annotations else {
        return "none".into();
    };
    let flags = [
        ("readOnly", hints.read_only_hint),
        ("destructive", hints.destructive_hint),
        ("idempotent", hints.idempotent_hint),
    ];
    let set: Vec<String> = flags
        .iter()
        .filter_map(|(name, value)| value.map(|v| format!("{name}={v}")))
        .collect();
    if set.is_empty() {
        "none".into()
    } else {
        set.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{JsonObject, ToolAnnotations};
    use std::sync::Arc;

    fn tool(hints: Option<ToolAnnotations>) -> Tool {
        let tool = Tool::new("t", "t", Arc::new(JsonObject::new()));
        match hints {
            Some(h) => tool.with_annotations(h),
            None => tool,
        }
    }

    #[test]
    fn annotations_map_onto_effects_and_silence_means_irreversible() {
        let cases = [
            (
                Some(ToolAnnotations::new().read_only(true)),
                Effect::ReadOnly,
            ),
            (
                Some(ToolAnnotations::new().destructive(false).idempotent(true)),
                Effect::IdempotentWrite,
            ),
            (
                Some(ToolAnnotations::new().destructive(false)),
                Effect::NonIdempotentWrite,
            ),
            (
                Some(ToolAnnotations::new().destructive(true)),
                Effect::Irreversible,
            ),
            (Some(ToolAnnotations::new()), Effect::Irreversible),
            (None, Effect::Irreversible),
        ];
        for (hints, effect) in cases {
            assert_eq!(
                effect_from_annotations(&tool(hints.clone())),
                effect,
                "{hints:?}"
            );
        }
    }
}
