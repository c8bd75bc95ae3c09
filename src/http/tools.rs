//! `/v1/tools`: the registry of tools and the promise idem keeps for each.

use app::domain::{Permission, ToolName, ToolPolicy};
use app::ledger::RegisteredTool;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::auth::{Caller, Person};
use super::error::{ApiError, ApiResult};
use super::json::AppJson;
use crate::startup::AppState;

/// The tool routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/tools", get(list))
        .route("/v1/tools/{name}", get(read).put(register))
}

/// A tool as answered: its policy, flattened, plus what idem can promise for it.
#[derive(Serialize)]
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

#[derive(Serialize)]
struct ToolBody {
    tool: ToolView,
}

#[derive(Serialize)]
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

async fn list(State(state): State<AppState>, caller: Caller) -> ApiResult<AppJson<ToolsBody>> {
    may_read(&caller)?;
    let tools = state
        .ledger
        .tools()
        .await?
        .into_iter()
        .map(ToolView::from)
        .collect();
    Ok(AppJson(ToolsBody { tools }))
}

async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<AppJson<ToolBody>> {
    may_read(&caller)?;
    let (name, policy, registered) = state.ledger.tool(&name).await?;
    let tool = ToolView {
        guarantee: policy.guarantee(),
        name,
        policy,
        registered,
        created_at: None,
        updated_at: None,
    };
    Ok(AppJson(ToolBody { tool }))
}

#[tracing::instrument(skip_all, fields(actor = %person.0.username, tool = %name))]
async fn register(
    State(state): State<AppState>,
    person: Person,
    Path(name): Path<String>,
    AppJson(body): AppJson<Value>,
) -> ApiResult<AppJson<ToolBody>> {
    person.require(Permission::Administer)?;
    let policy: ToolPolicy = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("invalid_tool_policy", e.to_string()))?;
    let tool = state.ledger.put_tool(&name, policy).await?;
    Ok(AppJson(ToolBody { tool: tool.into() }))
}
