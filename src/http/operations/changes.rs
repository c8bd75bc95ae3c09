//! `GET /v1/operations/changes`: operation changes as they commit, as server-sent events, for
//! live views. On PostgreSQL they come from every process on the database.

use std::convert::Infallible;
use std::time::Duration;

use app::domain::Namespace;
use app::ledger::OperationChange;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use super::visible_namespace;
use crate::http::auth::Caller;
use crate::http::error::{ApiResult, ErrorBody};
use crate::startup::AppState;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Operation changes, one `operation` event per committed change, as long as the client
/// listens. A subscriber that falls far behind skips what it missed; reload to catch up.
#[utoipa::path(
    get,
    path = "/v1/operations/changes",
    operation_id = "operation_changes",
    tag = "operations",
    security(("api_key" = []), ("session" = [])),
    responses(
        (status = 200, content_type = "text/event-stream", body = OperationChange,
            description = "A stream of `event: operation` with `data: {\"id\", \"namespace\", \
                \"status\", \"at\"}` per change (an agent's key: its own namespace only), and \
                a `:` comment every 15 s"),
        (status = 401, body = ErrorBody,
            description = "`unauthorized`: no credentials, or an invalid or revoked API key"),
        (status = 403, body = ErrorBody, description = "`forbidden`: no read permission"),
        (status = 500, body = ErrorBody, description = "`internal_error`"),
    )
)]
pub(crate) async fn changes(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let namespace = visible_namespace(&caller)?.cloned();
    // Subscribed before answering, so nothing committed after the headers is missed.
    let changes = state.database.changes().clone();
    let receiver = changes.subscribe();
    let events = stream::unfold(
        (receiver, namespace, changes),
        |(mut receiver, namespace, changes)| async move {
            // The stream ends when the process stops, so it never holds the shutdown open.
            let change = tokio::select! {
                change = next_visible(&mut receiver, namespace.as_ref()) => change?,
                () = changes.closed() => return None,
            };
            Some((Ok(event(&change)), (receiver, namespace, changes)))
        },
    );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
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
