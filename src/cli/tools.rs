//! `idem tools …`: idem's tool registry, from the command line (audited as actor `cli`).

use anyhow::Context;
use app::audit::actions;
use clap::Subcommand;
use serde_json::json;

use super::{audit, open};
use crate::config::DatabaseArgs;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Register every tool of an MCP server that is not registered yet, its effect taken from
    /// its annotations; prints the table. Never changes a registered tool.
    ImportMcp {
        /// Print what would be registered, and register nothing.
        #[arg(long)]
        dry_run: bool,
        /// The MCP server as a streamable-HTTP endpoint (instead of `-- COMMAND`).
        #[arg(long)]
        upstream_url: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
        /// The MCP server's command and arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
}

pub(super) async fn tools(command: ToolsCommand) -> anyhow::Result<()> {
    let ToolsCommand::ImportMcp {
        dry_run,
        upstream_url,
        database,
        command,
    } = command;
    let upstream = crate::mcp::upstream::Upstream::from_args(upstream_url, command)?;
    // No host sessions: whatever the server announces meanwhile is dropped.
    let client = upstream
        .connect(crate::mcp::sessions::Sessions::default())
        .await?;
    let listed = client.peer().list_all_tools().await;
    let _ = client.cancel().await;
    let listed = listed.context("listing the MCP server's tools")?;
    let db = open(&database).await?;
    let rows = crate::mcp::import::import(db.ledger_store().as_ref(), &listed, dry_run).await?;
    for row in &rows {
        if let crate::mcp::import::Decision::Register(effect) = row.decision {
            if !dry_run {
                let detail = json!({ "policy": { "effect": effect }, "source": "import-mcp" });
                let subject = format!("tool:{}", row.tool);
                audit(&db, actions::TOOL_REGISTERED, subject, detail).await;
            }
        }
    }
    print!("{}", crate::mcp::import::table(&listed, &rows, dry_run));
    Ok(())
}
