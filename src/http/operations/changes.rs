//! `GET /v1/operations/changes`: operation changes as they commit, as server-sent events, for
//! live views. On PostgreSQL they come from every process on the database.

use std::convert::Infallible;

use app::domain::Namespace;
use app::ledger::{Changes, OperationChange};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;
use tokio::time::Interval;

use super::visible_namespace;
use crate::http::admission::Ticket;
use crate::http::auth::{Caller, Credential};
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::startup::AppState;

/// One server-sent event of the stream.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: events are written by `event`
pub(crate) struct ChangeEvent {
    /// Always `operation`.
    #[schema(pattern = "^operation$")]
    event: String,
    /// An `OperationChange` as JSON: `{"id", "namespace", "status", "at"}`.
    data: String,
}

/// Operation changes, one `operation` event per committed change, as long as the client
/// listens. A subscriber that falls far behind skips what it missed; reload to catch up.
#[utoipa::path(
    get,
    path = "/v1/operations/changes",
    operation_id = "operation_changes",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    responses(
        (status = 200, content_type = "text/event-stream", body = ChangeEvent,
            description = "A stream of `event: operation` with `data: {\"id\", \"namespace\", \
                \"status\", \"at\"}` per change (an agent's key: its own namespace only), and \
                a `:` comment every 15 s (`IDEM_STREAM_KEEP_ALIVE_MS`), at which the key or \
                session is checked again: the stream ends once it is revoked, ended or expired"),
        (status = 403, body = ErrorBody, description = "`forbidden`: no read permission"),
    )
)]
pub(crate) async fn changes(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let namespace = visible_namespace(&caller)?.cloned();
    let credential = Credential::of(&headers).ok_or(ApiError::Unauthorized("sign in"))?;
    let key_id = match &caller {
        Caller::Agent(agent) => Some(agent.0.key_id),
        Caller::Person(_) => None,
    };
    let ticket = state.admission.admit_stream(key_id)?;
    // Subscribed before answering, so nothing committed after the headers is missed.
    let changes = state.database.changes().clone();
    let period = state.stream_keep_alive;
    let open = OpenStream {
        receiver: changes.subscribe(),
        changes,
        namespace,
        credential,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + period, period),
        state,
        _ticket: ticket,
    };
    Ok(Sse::new(stream::unfold(open, OpenStream::next)))
}

/// A change stream being served, with what it needs to go on.
struct OpenStream {
    receiver: Receiver<OperationChange>,
    changes: Changes,
    namespace: Option<Namespace>,
    /// Checked again at each keep-alive: the stream ends with the key or the session.
    credential: Credential,
    keep_alive: Interval,
    state: AppState,
    /// The stream's place under the caps, given back when it ends.
    _ticket: Ticket,
}

impl OpenStream {
    /// The next event: a change the caller may see, or a keep-alive comment; none once the
    /// process stops (so a stream never holds the shutdown open) or the credential is no
    /// longer valid.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        let event = tokio::select! {
            change = next_visible(&mut self.receiver, self.namespace.as_ref()) => event(&change?),
            () = self.changes.closed() => return None,
            _ = self.keep_alive.tick() => {
                if !self.credential.is_still_valid(&self.state).await {
                    return None;
                }
                Event::default().comment("keep-alive")
            }
        };
        Some((Ok(event), self))
    }
}

/// The next change the caller may see, or `None` once the process stops publishing.
async fn next_visible(
    receiver: &mut Receiver<OperationChange>,
    namespace: Option<&Namespace>,
) -> Option<OperationChange> {
    loop {
        match receiver.recv().await {
            Ok(change) if namespace.is_none_or(|own| *own == change.namespace) => {
                return Some(change)
            }
            Ok(_) => {}
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "a change stream subscriber fell behind");
            }
            Err(RecvError::Closed) => return None,
        }
    }
}

fn event(change: &OperationChange) -> Event {
    let data = serde_json::to_string(change).unwrap_or_default();
    Event::default().event("operation").data(data)
}
