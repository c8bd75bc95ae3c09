//! `idem sandbox-mcp`: an MCP server whose tools count their effects, one of each kind idem
//! cares about, for tests and demos. Each effect is one line `tool arguments` appended to the
//! effects file, so several processes (two proxies, each with its own child) share the count.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The sandbox's tools: name, what it does, its annotations.
fn tools() -> Vec<Tool> {
    let schema: Arc<JsonObject> = Arc::new(
        json!({ "type": "object", "additionalProperties": true })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let tool = |name: &'static str, about: &'static str, hints: Option<ToolAnnotations>| {
        let tool = Tool::new(name, about, schema.clone());
        match hints {
            Some(hints) => tool.with_annotations(hints),
            None => tool,
        }
    };
    let plain = || ToolAnnotations::new().destructive(false);
    vec![
        tool(
            "lookup_order",
            "Reads an order.",
            Some(ToolAnnotations::new().read_only(true)),
        ),
        tool(
            "set_address",
            "Sets an order's address.",
            Some(plain().idempotent(true)),
        ),
        tool("send_email", "Sends an email.", Some(plain())),
        tool(
            "wire_transfer",
            "Wires money out.",
            Some(ToolAnnotations::new().destructive(true)),
        ),
        tool("export_everything", "Never answers.", Some(plain())),
        tool(
            "charge_declined",
            "Fails: the card is declined.",
            Some(plain()),
        ),
        tool("unannotated", "Carries no annotations.", None),
    ]
}

/// The sandbox MCP server, writing its effects to a file.
pub struct SandboxMcp {
    effects: PathBuf,
}

impl SandboxMcp {
    /// Serves on stdio until the client leaves, or over streamable HTTP on `listen`.
    pub async fn run(effects: PathBuf, listen: Option<std::net::SocketAddr>) -> anyhow::Result<()> {
        if let Some(listen) = listen {
            return super::http::serve(listen, "idem sandbox-mcp", move || Self {
                effects: effects.clone(),
            })
            .await;
        }
        let server = Self { effects }.serve(rmcp::transport::stdio()).await?;
        server.waiting().await?;
        Ok(())
    }

    fn record(&self, tool: &str, args: &Value) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.effects)?;
        // One write per line: appends from several processes do not interleave.
        file.write_all(format!("{tool} {args}\n").as_bytes())
    }
}

impl ServerHandler for SandboxMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        if !tools().iter().any(|t| t.name == request.name) {
            return Err(McpError::invalid_params("no such tool", None));
        }
        self.record(&request.name, &args)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let text = |s: String| vec![ContentBlock::text(s)];
        let result = match request.name.as_ref() {
            "export_everything" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                CallToolResult::success(text("exported".into()))
            }
            "charge_declined" => CallToolResult::error(text("card_declined".into())),
            name => CallToolResult::success(text(format!("{name} done with {args}"))),
        };
        Ok(result.into())
    }
}
