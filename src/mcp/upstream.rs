//! The MCP server behind the proxy: a child process spoken to over stdio, or a URL.

use anyhow::{bail, Context};
use rmcp::service::{RoleClient, RunningService, Service};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;

/// Where the upstream MCP server is.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A command (and its arguments) started as a child process, spoken to over stdio.
    Command(Vec<String>),
    /// A streamable-HTTP MCP endpoint.
    Url(String),
}

impl Upstream {
    /// From the command line: `--upstream-url URL` or `-- COMMAND [ARGS…]`, exactly one.
    pub fn from_args(url: Option<String>, command: Vec<String>) -> anyhow::Result<Self> {
        match (url, command.is_empty()) {
            (Some(url), true) => Ok(Self::Url(url)),
            (None, false) => Ok(Self::Command(command)),
            _ => {
                bail!("give the upstream MCP server as --upstream-url URL or as -- COMMAND [ARGS…]")
            }
        }
    }

    /// Starts or reaches the upstream and completes the MCP handshake with it; `handler`
    /// takes what the upstream sends of its own accord (notifications, requests).
    pub async fn connect<H: Service<RoleClient>>(
        &self,
        handler: H,
    ) -> anyhow::Result<RunningService<RoleClient, H>> {
        match self {
            Self::Command(command) => {
                let mut child = tokio::process::Command::new(&command[0]);
                child.args(&command[1..]);
                let transport = TokioChildProcess::new(child)
                    .with_context(|| format!("starting the upstream {:?}", command[0]))?;
                handler
                    .serve(transport)
                    .await
                    .context("the MCP handshake with the upstream")
            }
            Self::Url(url) => handler
                .serve(StreamableHttpClientTransport::from_uri(url.as_str()))
                .await
                .with_context(|| format!("the MCP handshake with the upstream {url}")),
        }
    }
}
