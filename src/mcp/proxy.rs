//! The MCP server the host talks to: the upstream's tools, listed unchanged, every call
//! through the ledger, and everything else forwarded as it is.

#![allow(deprecated)] // resources/subscribe and logging/setLevel: still forwarded for old hosts.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, ServerPeerInfo, SetLevelRequestParams,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, ServiceError};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use std::sync::Arc;

use super::call_keys::claim_for;
use super::gate::Gate;

/// One downstream session: the upstream it forwards to and the run its calls belong to.
pub struct McpProxy {
    upstream: Peer<RoleClient>,
    info: ServerConfig,
    gate: Arc<Gate>,
    session_run: String,
}

impl McpProxy {
    /// A session in front of `upstream`; without `_meta` keys, its calls are one run.
    pub fn new(upstream: Peer<RoleClient>, gate: Arc<Gate>) -> Self {
        let info = upstream
            .peer_info()
            .map(|peer| server_config(&peer))
            .unwrap_or_default();
        Self {
            upstream,
            info,
            gate,
            session_run: format!("mcp-session-{}", uuid::Uuid::now_v7()),
        }
    }
}

/// The upstream's own identity and capabilities, offered to the host as they are.
fn server_config(peer: &ServerPeerInfo) -> ServerConfig {
    let mut config = ServerConfig::new(peer.capabilities.clone());
    if let Some(implementation) = &peer.server_info {
        config.server_info = implementation.clone();
    }
    config.instructions = peer.instructions.clone();
    config
}

fn forwarded(error: ServiceError) -> McpError {
    match error {
        ServiceError::McpError(error) => error,
        other => McpError::internal_error(format!("upstream: {other}"), None),
    }
}

impl ServerHandler for McpProxy {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let mut meta = vec![&context.meta.0 .0];
        if let Some(own) = &request.meta {
            meta.insert(0, &own.0 .0);
        }
        let claim = claim_for(&request.name, args, &meta, &self.session_run);
        self.gate
            .call(&self.upstream, claim, request, context.ct.clone())
            .await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.upstream.list_tools(request).await.map_err(forwarded)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.upstream
            .list_resources(request)
            .await
            .map_err(forwarded)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let templates = self.upstream.list_resource_templates(request).await;
        templates.map_err(forwarded)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let resource = self.upstream.read_resource_once(request).await;
        resource.map_err(forwarded)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.upstream.list_prompts(request).await.map_err(forwarded)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.upstream
            .get_prompt_once(request)
            .await
            .map_err(forwarded)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.upstream.complete(request).await.map_err(forwarded)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.upstream.set_level(request).await.map_err(forwarded)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.upstream.subscribe(request).await.map_err(forwarded)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.upstream.unsubscribe(request).await.map_err(forwarded)
    }
}
