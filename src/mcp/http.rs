//! MCP over streamable HTTP, for the proxy's host (`--listen`) and the sandbox server: rmcp's
//! service under `/mcp` on an axum router, until SIGINT or SIGTERM.

use anyhow::Context;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves the MCP server that `session` makes for each HTTP session at `http://listen/mcp`.
/// Says where on stderr (`<who>: serving MCP on http://…/mcp`), since `listen` may name port 0.
pub async fn serve<S>(
    listen: SocketAddr,
    who: &str,
    session: impl Fn() -> S + Send + Sync + 'static,
) -> anyhow::Result<()>
where
    S: ServerHandler,
{
    let service = StreamableHttpService::new(
        move || Ok(session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    eprintln!(
        "{who}: serving MCP on http://{}/mcp",
        listener.local_addr()?
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(crate::startup::shutdown_signal())
        .await?;
    Ok(())
}
