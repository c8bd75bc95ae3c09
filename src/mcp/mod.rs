//! `idem mcp-proxy`: the ledger in front of any MCP server's tools, and `idem tools
//! import-mcp`, which seeds the tool registry from an MCP server's annotations.
//!
//! The proxy is a client of idem's REST API like any agent (an API key, claim → act →
//! report); it holds no ledger rules of its own. Modules: `ledger_client` (idem's API),
//! `call_keys` (which key a call claims), `gate` (one call through the ledger), `answers`
//! (what the model is told), `proxy` (the MCP server the host sees), `relay` (a host's
//! request sent upstream), `sessions` (which host sessions an upstream notification goes
//! to), `upstream` (the MCP server behind it), `import` (annotations → effects), `sandbox` (a
//! server for tests).

pub mod answers;
pub mod call_keys;
pub mod gate;
pub mod http;
pub mod import;
pub mod ledger_client;
pub mod proxy;
pub mod relay;
pub mod sandbox;
pub mod sessions;
pub mod upstream;

use anyhow::Context;
use rmcp::ServiceExt;
use std::sync::Arc;
use std::time::Duration;

use gate::{Gate, GateOptions};
use ledger_client::LedgerClient;
use proxy::McpProxy;
use relay::Relay;
use sessions::Sessions;
use upstream::Upstream;

/// `idem mcp-proxy`'s options.
#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// The idem server, e.g. http://127.0.0.1:3000.
    #[arg(long, env = "IDEM_URL")]
    pub idem_url: String,
    /// An agent's API key (`idem keys create`); the calls live in its namespace.
    #[arg(long, env = "IDEM_API_KEY", hide_env_values = true)]
    pub api_key: String,
    /// Serve MCP to the host over streamable HTTP on this address (its endpoint is `/mcp`),
    /// instead of on stdio; for hosts on this machine (loopback `Host` names only).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// The upstream as a streamable-HTTP MCP endpoint (instead of `-- COMMAND`).
    #[arg(long)]
    pub upstream_url: Option<String>,
    /// Wait up to this many seconds for a person's approval instead of answering at once.
    #[arg(long)]
    pub approval_wait: Option<u64>,
    /// Wait up to this many seconds (≤ 60) for a duplicate's first call to finish.
    #[arg(long, default_value_t = 10)]
    pub in_progress_wait: u64,
    /// An upstream call that takes longer has an unknown outcome (and is never re-sent).
    #[arg(long, default_value_t = 60)]
    pub upstream_timeout: u64,
    /// The upstream MCP server's command and arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// Runs the proxy on stdio until the host closes it, or over streamable HTTP (`--listen`)
/// until the process is told to stop.
pub async fn run_proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let upstream = Upstream::from_args(args.upstream_url.clone(), args.command.clone())?;
    let sessions = Sessions::default();
    let client = upstream.connect(sessions.clone()).await?;
    let relay = Relay::new(client.peer().clone(), sessions);
    let ledger = LedgerClient::new(&args.idem_url, &args.api_key);
    warn_about_unregistered_tools(client.peer(), &ledger).await;
    let options = GateOptions {
        approval_wait: args.approval_wait.map(Duration::from_secs),
        in_progress_wait_seconds: args.in_progress_wait.clamp(1, 60),
        upstream_timeout: Duration::from_secs(args.upstream_timeout),
    };
    let gate = Arc::new(Gate::new(ledger, options));
    if let Some(listen) = args.listen {
        // Each HTTP session of the host is a proxy session of its own (its own run), and
        // all of them share the one upstream connection (`sessions` routes its
        // notifications).
        http::serve(listen, "idem mcp-proxy", move || {
            McpProxy::new(relay.clone(), gate.clone())
        })
        .await?;
    } else {
        let proxy = McpProxy::new(relay, gate);
        let downstream = proxy
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP handshake with the host")?;
        downstream.waiting().await?;
    }
    client.cancel().await?;
    Ok(())
}

/// Unregistered tools get idem's default policy (`non_idempotent_write`); say so, since an
/// irreversible tool then runs without approval.
async fn warn_about_unregistered_tools(
    upstream: &rmcp::service::Peer<rmcp::service::RoleClient>,
    ledger: &LedgerClient,
) {
    let Ok(tools) = upstream.list_all_tools().await else {
        return;
    };
    for tool in tools {
        if let Ok(false) = ledger.is_registered(&tool.name).await {
            eprintln!(
                "idem mcp-proxy: warning: tool {:?} is not registered in idem; it is treated as \
                 non_idempotent_write (no approval). Register it, or run `idem tools import-mcp`.",
                tool.name
            );
        }
    }
}
