//! The MCP server behind the proxy: a child process spoken to over stdio, or a URL, read in
//! order (`InOrder`).

use anyhow::{bail, Context};
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::ServiceExt;

use super::sessions::Sessions;

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

    /// Starts or reaches the upstream and completes the MCP handshake with it; what the
    /// upstream says of its own accord goes to `sessions` (which, without hosts, hears it
    /// and drops it).
    pub async fn connect(
        &self,
        sessions: Sessions,
    ) -> anyhow::Result<RunningService<RoleClient, Sessions>> {
        match self {
            Self::Command(command) => {
                let mut child = tokio::process::Command::new(&command[0]);
                child.args(&command[1..]);
                let transport = TokioChildProcess::new(child)
                    .with_context(|| format!("starting the upstream {:?}", command[0]))?;
                let transport = InOrder::new(transport, sessions.clone());
                sessions
                    .serve(transport)
                    .await
                    .context("the MCP handshake with the upstream")
            }
            Self::Url(url) => {
                let transport = StreamableHttpClientTransport::from_uri(url.as_str());
                let transport = InOrder::new(transport, sessions.clone());
                sessions
                    .serve(transport)
                    .await
                    .with_context(|| format!("the MCP handshake with the upstream {url}"))
            }
        }
    }
}

/// The upstream connection, read in order: each notification goes to
/// `Sessions::dispatch` as it arrives, and only what that leaves reaches rmcp, which would
/// handle each notification on a task of its own and so lose their order.
struct InOrder<T> {
    inner: T,
    sessions: Sessions,
}

impl<T> InOrder<T> {
    fn new(inner: T, sessions: Sessions) -> Self {
        Self { inner, sessions }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for InOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        message: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(message)
    }

    /// As cancel-safe as the inner transport, which rmcp needs (it polls this in a
    /// `select!`): nothing is awaited after a message is taken.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(notification) = &message {
                if self.sessions.dispatch(&notification.notification) {
                    continue;
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
