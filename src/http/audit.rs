//! The audit of people over REST: where a request came from (`ClientAddress`), how a
//! person acting is handed to the shared actions (`Person::acting`), and the log itself, `GET /v1/audit`
//! (admin only; an extension of the contract).

use app::audit::AuditEvent;
use app::domain::Permission;
use axum::extract::{ConnectInfo, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use super::auth::Person;
use super::error::{ApiResult, ErrorBody};
use super::json::AppJson;
use super::page;
use crate::startup::AppState;

/// `/v1/audit`.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/audit", get(list))
}

/// The address the request came from, as the server saw the connection (behind a proxy,
/// the proxy's). `None` only when the server runs without connection info.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = Infallible;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        Ok(Self(peer.map(|ConnectInfo(peer)| peer.ip())))
    }
}

impl Person {
    /// This person acting from this address, as the shared actions take them.
    pub fn acting(&self, address: ClientAddress) -> app::people_actions::Acting {
        app::people_actions::Acting {
            person: self.0.clone(),
            address: address.0,
        }
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct AuditParams {
    /// 1 to 200, default 50.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page; opaque.
    cursor: Option<String>,
}

/// A page of the audit log, newest first.
#[derive(Serialize, utoipa::ToSchema)]
struct AuditBody {
    events: Vec<AuditEvent>,
    next_cursor: Option<String>,
}

/// What people did: sign-ins (failed ones too), approvals, rejections, API keys, users,
/// passwords and tool changes, each with who, when and from which address; newest first,
/// keyset-paginated.
#[utoipa::path(
    get,
    path = "/v1/audit",
    operation_id = "list_audit_events",
    tag = "admin",
    security(("session" = [])),
    params(AuditParams),
    responses(
        (status = 200, body = AuditBody,
            description = "A page of the audit log; `next_cursor` is null on the last page"),
        (status = 400, body = ErrorBody, description = "`invalid_limit` or `invalid_cursor`"),
        (status = 403, body = ErrorBody,
            description = "`forbidden`: not an admin, or an API key (this is for people)"),
    )
)]
async fn list(
    State(state): State<AppState>,
    person: Person,
    Query(params): Query<AuditParams>,
) -> ApiResult<AppJson<AuditBody>> {
    person.require(Permission::Administer)?;
    let (limit, before) = page::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    let (events, more) = state.audit.page(before, limit).await?;
    let next_cursor = page::next_cursor(more, events.last().map(|event| event.id));
    Ok(AppJson(AuditBody {
        events,
        next_cursor,
    }))
}
