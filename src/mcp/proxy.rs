//! The MCP server the host talks to: the upstream's tools, listed unchanged, every call
//! through the ledger, and everything else forwarded as it is.

#![allow(deprecated)] // resources/subscribe and logging/setLevel: still forwarded for old hosts.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, Request, RequestOptionalParam, ServerConfig, ServerPeerInfo,
    ServerResult, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServiceError};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use std::sync::Arc;

use super::call_keys::claim_for;
use super::gate::Gate;
use super::relay::Relay;
use super::sessions::SessionId;

/// One downstream session: the upstream it forwards to and the run its calls belong to.
pub struct McpProxy {
    relay: Relay,
    info: ServerConfig,
    gate: Arc<Gate>,
    id: SessionId,
    session_run: String,
}

impl McpProxy {
    /// A session in front of the relay's upstream; without `_meta` keys, its calls are one
    /// run.
    pub fn new(relay: Relay, gate: Arc<Gate>) -> Self {
        let info = relay
            .upstream()
            .peer_info()
            .map(|peer| server_config(&peer))
            .unwrap_or_default();
        let id = uuid::Uuid::now_v7();
        Self {
            relay,
            info,
            gate,
            id,
            session_run: format!("mcp-session-{id}"),
        }
    }

    /// Sends the host's request upstream and hands back the answer `pick` expects.
    async fn relay<T>(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        pick: impl FnOnce(ServerResult) -> Option<T>,
    ) -> Result<T, McpError> {
        self.relay.sessions().join(self.id, &context.peer);
        let answer = self.relay.send(request, context).await.map_err(forwarded)?;
        pick(answer)
            .ok_or_else(|| McpError::internal_error("upstream: an answer of the wrong kind", None))
    }
}

impl Drop for McpProxy {
    fn drop(&mut self) {
        let (relay, id) = (self.relay.clone(), self.id);
        // The session is over: its subscriptions end (Drop cannot wait for the upstream).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { relay.sessions().leave(id, relay.upstream()).await });
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

/// A paginated list request, as the host sent it.
fn listing<M: Default, P>(params: Option<P>) -> RequestOptionalParam<M, P> {
    RequestOptionalParam {
        method: M::default(),
        params,
        extensions: Default::default(),
    }
}

impl ServerHandler for McpProxy {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.relay.sessions().join(self.id, &context.peer);
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.relay.sessions().join(self.id, &context.peer);
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let mut meta = vec![&context.meta.0 .0];
        if let Some(own) = &request.meta {
            meta.insert(0, &own.0 .0);
        }
        let claim = claim_for(&request.name, args, &meta, &self.session_run);
        self.gate.call(&self.relay, claim, request, &context).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let request = ClientRequest::ListToolsRequest(listing(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::ListToolsResult(listed) => Some(listed),
            _ => None,
        })
        .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let request = ClientRequest::ListResourcesRequest(listing(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::ListResourcesResult(listed) => Some(listed),
            _ => None,
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let request = ClientRequest::ListResourceTemplatesRequest(listing(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::ListResourceTemplatesResult(listed) => Some(listed),
            _ => None,
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let request = ClientRequest::ReadResourceRequest(Request::new(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::ReadResourceResult(read) => Some(read.into()),
            ServerResult::InputRequiredResult(asks) => {
                Some(ReadResourceResponse::InputRequired(asks))
            }
            _ => None,
        })
        .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let request = ClientRequest::ListPromptsRequest(listing(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::ListPromptsResult(listed) => Some(listed),
            _ => None,
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let request = ClientRequest::GetPromptRequest(Request::new(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::GetPromptResult(prompt) => Some(prompt.into()),
            ServerResult::InputRequiredResult(asks) => Some(GetPromptResponse::InputRequired(asks)),
            _ => None,
        })
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let request = ClientRequest::CompleteRequest(Request::new(request));
        self.relay(request, &context, |answer| match answer {
            ServerResult::CompleteResult(completed) => Some(completed),
            _ => None,
        })
        .await
    }

    /// The upstream has one log level for all sessions: the last one set wins.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let request = ClientRequest::SetLevelRequest(Request::new(request));
        self.relay(request, &context, empty).await
    }

    /// Subscribes upstream (again, harmlessly, if another session already did) and counts
    /// this session among the resource's subscribers.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        let sessions = self.relay.sessions();
        let _changing = sessions.changing_subscriptions().await;
        let request = ClientRequest::SubscribeRequest(Request::new(request));
        self.relay(request, &context, empty).await?;
        sessions.subscriptions().add(&uri, self.id);
        Ok(())
    }

    /// Unsubscribes upstream only when no other session is still subscribed.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let sessions = self.relay.sessions();
        let _changing = sessions.changing_subscriptions().await;
        if !sessions.subscriptions().remove(&request.uri, self.id) {
            return Ok(());
        }
        let request = ClientRequest::UnsubscribeRequest(Request::new(request));
        self.relay(request, &context, empty).await
    }
}

/// An empty answer, as `logging/setLevel` and `resources/(un)subscribe` expect.
fn empty(answer: ServerResult) -> Option<()> {
    matches!(answer, ServerResult::EmptyResult(_)).then_some(())
}
