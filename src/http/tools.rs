//! `/v1/tools`: the registry of tools and the promise idem keeps for each.

use app::domain::{Permission, ToolName, ToolPolicy};
use app::ledger::RegisteredTool;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::audit::ClientAddress;
use super::auth::{Admin, Caller};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::json::AppJson;
use crate::startup::AppState;

/// The tool routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/tools", get(list))
        .route("/v1/tools/{name}", get(read).put(register))
        .route("/v1/tools/{name}/invoke", post(super::invoke::invoke))
}

/// A tool as answered: its policy, flattened, plus what idem can promise for it.
#[derive(Serialize, utoipa::ToSchema)]
struct ToolView {
    name: ToolName,
    #[serde(flatten)]
    policy: ToolPolicy,
    guarantee: app::domain::Guarantee,
    registered: bool,
    created_at: Option<DateTime<Utc>>,
    updated_at: Option<DateTime<Utc>>,
}

impl From<RegisteredTool> for ToolView {
    fn from(tool: RegisteredTool) -> Self {
        Self {
            guarantee: tool.policy.guarantee(),
            name: tool.name,
            policy: tool.policy,
            registered: true,
            created_at: Some(tool.created_at),
            updated_at: Some(tool.updated_at),
        }
    }
}

/// One tool: its fields at the top level, as API.md shows a tool (so `guarantee` is read
/// where a client written from the contract looks for it), and the same again under `tool`,
/// the shape this server answered first.
#[derive(Serialize, utoipa::ToSchema)]
struct ToolBody<'a> {
    #[serde(flatten)]
    fields: &'a ToolView,
    tool: &'a ToolView,
}

fn tool_answer(tool: &ToolView) -> AppJson<ToolBody<'_>> {
    AppJson(ToolBody { fields: tool, tool })
}

/// Every registered tool.
#[derive(Serialize, utoipa::ToSchema)]
struct ToolsBody {
    tools: Vec<ToolView>,
}

/// Agents and people alike may read the registry (agents need the guarantee).
fn may_read(caller: &Caller) -> ApiResult<()> {
    match caller {
        Caller::Agent(_) => Ok(()),
        Caller::Person(person) => person.require(Permission::Read),
    }
}

/// The policy as this caller may see it: whole for admins; for everyone else, executor URLs
/// cut to their origin, since they may carry credentials.
fn shown_to(caller: &Caller, policy: ToolPolicy) -> ToolPolicy {
    match caller {
        Caller::Person(person) if person.0.role.can(Permission::Administer) => policy,
        _ => policy.without_credentials(),
    }
}

/// Every registered tool, with the guarantee idem keeps for it.
#[utoipa::path(
    get,
    path = "/v1/tools",
    operation_id = "list_tools",
    tag = "tools",
    security(("api_key" = []), ("session" = [])),
    responses(
        (status = 200, body = ToolsBody, description = "The registered tools"),
    )
)]
async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<AppJson<ToolsBody>> {
    may_read(&caller)?;
    let tools = state
        .ledger
        .tools()
        .await?
        .into_iter()
        .map(|mut tool| {
            tool.policy = shown_to(&caller, tool.policy);
            ToolView::from(tool)
        })
        .collect();
    Ok(AppJson(ToolsBody { tools }))
}

/// A tool's policy and guarantee; a tool never registered answers its default policy with
/// `"registered": false`.
#[utoipa::path(
    get,
    path = "/v1/tools/{name}",
    operation_id = "read_tool",
    tag = "tools",
    security(("api_key" = []), ("session" = [])),
    params(("name" = ToolName, Path, description = "The tool's name")),
    responses(
        (status = 200, body = ToolBody, description = "The tool, registered or not"),
        (status = 404, body = ErrorBody,
            description = "`not_found`: the name is not a valid tool name"),
    )
)]
async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    may_read(&caller)?;
    let (name, policy, registered) = state.ledger.tool(&name).await?;
    let tool = ToolView {
        guarantee: policy.guarantee(),
        name,
        policy: shown_to(&caller, policy),
        registered,
        created_at: None,
        updated_at: None,
    };
    Ok(tool_answer(&tool).into_response())
}

/// Registers a tool, or replaces its policy. Every field may be left out for its default.
#[utoipa::path(
    put,
    path = "/v1/tools/{name}",
    operation_id = "register_tool",
    tag = "tools",
    security(("session" = [])),
    params(("name" = ToolName, Path, description = "The tool's name")),
    request_body = ToolPolicy,
    responses(
        (status = 200, body = ToolBody, description = "The tool as registered"),
        (status = 400, body = ErrorBody,
            description = "`malformed_json`, `invalid_tool_name` or `invalid_tool_policy`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
    )
)]
#[tracing::instrument(skip_all, fields(actor = %person.0.username, tool = ?name))]
async fn register(
    State(state): State<AppState>,
    Admin(person): Admin,
    address: ClientAddress,
    Path(name): Path<String>,
    AppJson(body): AppJson<Value>,
) -> ApiResult<Response> {
    let policy: ToolPolicy = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("invalid_tool_policy", e.to_string()))?;
    let by = person.acting(address);
    let tool = state
        .admin_actions
        .register_tool(&by, &name, policy)
        .await?;
    Ok(tool_answer(&ToolView::from(tool)).into_response())
}
