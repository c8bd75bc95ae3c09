//! `idem sandbox-mcp`: an MCP server whose tools count their effects, one of each kind idem
//! cares about, for tests and demos. Each effect is one line `tool arguments` appended to the
//! effects file, so several processes (two proxies, each with its own child) share the count.
//!
//! Beyond tools it has what a proxy must pass through: a resource one can subscribe to, a
//! prompt, a tool that reports progress and logs (`build_report`), and one that changes the
//! tool list and says so (`refresh_catalog`). Its notifications go to the connection that
//! caused them; lines `cancelled <tool>` and `resources/(un)subscribe <uri>` record what a
//! client asked of it.

#![allow(deprecated)] // logging and resources/(un)subscribe: what today's hosts still use.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, JsonObject, ListPromptsResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents,
    ResourceUpdatedNotificationParam, Role, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The sandbox's one resource.
pub const ORDER_URI: &str = "sandbox://orders/42";

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
        tool(
            "build_report",
            "Builds a report in three steps, reporting progress and logging as it goes.",
            Some(ToolAnnotations::new().read_only(true)),
        ),
        tool(
            "refresh_catalog",
            "Adds `track_parcel` to the tools and says that the tools, prompts and resources \
             changed and that the order was updated.",
            Some(plain().idempotent(true)),
        ),
    ]
}

/// The tool `refresh_catalog` adds.
fn late_tool() -> Tool {
    let schema = json!({ "type": "object" })
        .as_object()
        .cloned()
        .unwrap_or_default();
    Tool::new("track_parcel", "Tracks a parcel.", Arc::new(schema))
        .with_annotations(ToolAnnotations::new().read_only(true))
}

/// The sandbox MCP server (one per connection), writing its effects to a file.
pub struct SandboxMcp {
    effects: PathBuf,
    refreshed: AtomicBool,
    subscribed: Mutex<HashSet<String>>,
}

impl SandboxMcp {
    /// Serves on stdio until the client leaves, or over streamable HTTP on `listen`.
    pub async fn run(effects: PathBuf, listen: Option<std::net::SocketAddr>) -> anyhow::Result<()> {
        if let Some(listen) = listen {
            return super::http::serve(listen, "idem sandbox-mcp", move || {
                Self::new(effects.clone())
            })
            .await;
        }
        let server = Self::new(effects).serve(rmcp::transport::stdio()).await?;
        server.waiting().await?;
        Ok(())
    }

    fn new(effects: PathBuf) -> Self {
        Self {
            effects,
            refreshed: AtomicBool::new(false),
            subscribed: Mutex::default(),
        }
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
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut listed = tools();
        if self.refreshed.load(Ordering::SeqCst) {
            listed.push(late_tool());
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let known = tools().iter().any(|t| t.name == request.name)
            || (request.name == "track_parcel" && self.refreshed.load(Ordering::SeqCst));
        if !known {
            return Err(McpError::invalid_params("no such tool", None));
        }
        let failed = |e: std::io::Error| McpError::internal_error(e.to_string(), None);
        self.record(&request.name, &args).map_err(failed)?;
        let text = |s: String| vec![ContentBlock::text(s)];
        let result = match request.name.as_ref() {
            "export_everything" => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(3600)) => {}
                    () = context.ct.cancelled() => {
                        self.record("cancelled", &json!(request.name)).map_err(failed)?;
                    }
                }
                CallToolResult::success(text("exported".into()))
            }
            "charge_declined" => CallToolResult::error(text("card_declined".into())),
            "build_report" => build_report(&context, &args).await,
            "refresh_catalog" => {
                self.refreshed.store(true, Ordering::SeqCst);
                self.announce_changes(&context.peer).await;
                CallToolResult::success(text("the catalog changed".into()))
            }
            name => CallToolResult::success(text(format!("{name} done with {args}"))),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let order = Resource::new(ORDER_URI, "order 42").with_description("An order.");
        Ok(ListResourcesResult::with_all_items(vec![order]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if request.uri != ORDER_URI {
            return Err(McpError::resource_not_found("no such resource", None));
        }
        let contents = ResourceContents::text("order 42: shipped", ORDER_URI);
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscription("resources/subscribe", &request.uri, true)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscription("resources/unsubscribe", &request.uri, false)
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let argument = PromptArgument::new("order_id").with_required(true);
        let prompt = Prompt::new(
            "order_summary",
            Some("Summarizes an order."),
            Some(vec![argument]),
        );
        Ok(ListPromptsResult::with_all_items(vec![prompt]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let order = request
            .arguments
            .as_ref()
            .and_then(|args| args.get("order_id"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let message = PromptMessage::new_text(Role::User, format!("Summarize order {order}."));
        Ok(GetPromptResult::new(vec![message]).into())
    }

    async fn set_level(
        &self,
        _: rmcp::model::SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }
}

impl SandboxMcp {
    fn subscription(&self, what: &str, uri: &str, on: bool) -> Result<(), McpError> {
        self.record(what, &json!(uri))
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let mut subscribed = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if on {
            subscribed.insert(uri.to_owned());
        } else {
            subscribed.remove(uri);
        }
        Ok(())
    }

    /// Every list changed, and the order too (to a client subscribed to it).
    async fn announce_changes(&self, client: &Peer<RoleServer>) {
        let _ = client.notify_tool_list_changed().await;
        let _ = client.notify_prompt_list_changed().await;
        let _ = client.notify_resource_list_changed().await;
        let subscribed = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(ORDER_URI);
        if subscribed {
            let updated = ResourceUpdatedNotificationParam::new(ORDER_URI);
            let _ = client.notify_resource_updated(updated).await;
        }
    }
}

/// Three steps of progress (when the request asked for it, with its token) and a log line.
async fn build_report(context: &RequestContext<RoleServer>, args: &Value) -> CallToolResult {
    let log = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!({ "building": args }));
    let _ = context.peer.notify_logging_message(log).await;
    if let Some(token) = context.meta.get_progress_token() {
        for step in 1..=3 {
            let mut progress = ProgressNotificationParam::new(token.clone(), f64::from(step));
            progress.total = Some(3.0);
            progress.message = Some(format!("step {step} of {args}"));
            let _ = context.peer.notify_progress(progress).await;
        }
    }
    CallToolResult::success(vec![ContentBlock::text(format!("report of {args}"))])
}
