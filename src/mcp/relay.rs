//! One host request sent on to the upstream: its `_meta` goes along, progress on it comes
//! back to the host under the host's own token, and a request the host cancels (or the proxy
//! stops waiting for) is cancelled upstream too.

use rmcp::model::{
    CancelledNotificationParam, ClientNotification, ClientRequest, GetMeta, JsonObject,
    ProgressToken, RequestId, RequestMetaObject, ServerNotification, ServerResult,
};
use rmcp::service::{
    Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, ServiceError,
};
use tokio::sync::mpsc::UnboundedReceiver;

use super::sessions::Sessions;

/// `_meta` entries that describe the host's own connection to the proxy (rmcp sets the
/// proxy's for its connection upstream), and the progress token, which rmcp replaces.
const HOP_BY_HOP_META: [&str; 4] = [
    "progressToken",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
];

/// Why the proxy cancels an upstream request it forwarded.
const CANCELLED: &str = "idem mcp-proxy stopped waiting: the host cancelled the request, went \
                         away, or the call ran out of time";

/// The one upstream connection, as every host session uses it.
#[derive(Clone)]
pub struct Relay {
    upstream: Peer<RoleClient>,
    sessions: Sessions,
}

impl Relay {
    /// The relay over the `upstream` connection whose notifications go to `sessions`.
    pub fn new(upstream: Peer<RoleClient>, sessions: Sessions) -> Self {
        Self { upstream, sessions }
    }

    /// The upstream connection itself.
    pub fn upstream(&self) -> &Peer<RoleClient> {
        &self.upstream
    }

    /// Where the upstream's notifications go.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Sends `request` upstream on behalf of the host request `host` and waits for the
    /// answer, passing the upstream's progress on it to the host meanwhile (all of it before
    /// the answer). The host cancelling its request ends the wait with
    /// `ServiceError::Cancelled`; either that or dropping the returned future (a timeout)
    /// sends the upstream `notifications/cancelled` for the request.
    pub async fn send(
        &self,
        mut request: ClientRequest,
        host: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ServiceError> {
        *request.get_meta_mut() = forwarded_meta(&host.meta);
        let handle = self
            .upstream
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        // rmcp gave the upstream request a progress token of its own.
        let mut progress = host.meta.get_progress_token().map(|token| Progress {
            updates: self.sessions.expect_progress(handle.progress_token.clone()),
            upstream_token: handle.progress_token.clone(),
            host_token: token,
            host: host.peer.clone(),
            sessions: self.sessions.clone(),
        });
        let mut cancel = CancelOnDrop(Some((self.upstream.clone(), handle.id.clone())));
        let answer = handle.await_response();
        tokio::pin!(answer);
        let answer = loop {
            tokio::select! {
                // The answer wins over what came with it; progress before it is passed on
                // below, and the answer is in so there is nothing to cancel.
                biased;
                answer = &mut answer => break answer,
                Some(update) = next_update(&mut progress) => {
                    if let Some(progress) = &progress {
                        progress.pass_on(update).await;
                    }
                }
                () = host.ct.cancelled() => {
                    return Err(ServiceError::Cancelled { reason: Some("cancelled by the host".into()) })
                }
            }
        };
        cancel.0 = None;
        if let Some(progress) = &mut progress {
            while let Ok(update) = progress.updates.try_recv() {
                progress.pass_on(update).await;
            }
        }
        answer
    }
}

/// The upstream's progress on one forwarded request, for the host that asked for it.
struct Progress {
    updates: UnboundedReceiver<ServerNotification>,
    upstream_token: ProgressToken,
    host_token: ProgressToken,
    host: Peer<RoleServer>,
    sessions: Sessions,
}

impl Progress {
    /// One update to the host, under the host's own token.
    async fn pass_on(&self, mut update: ServerNotification) {
        if let ServerNotification::ProgressNotification(progress) = &mut update {
            progress.params.progress_token = self.host_token.clone();
        }
        let _ = self.host.send_notification(update).await;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.sessions.forget_progress(&self.upstream_token);
    }
}

/// The next update, or never when the host asked for none.
async fn next_update(progress: &mut Option<Progress>) -> Option<ServerNotification> {
    match progress {
        Some(progress) => progress.updates.recv().await,
        None => std::future::pending().await,
    }
}

/// The host's `_meta` minus what belongs to the host's own hop.
fn forwarded_meta(host: &RequestMetaObject) -> RequestMetaObject {
    let mut meta: JsonObject = host.0 .0.clone();
    for key in HOP_BY_HOP_META {
        meta.remove(key);
    }
    RequestMetaObject::from(meta)
}

/// Tells the upstream about a request nobody waits for any more, unless disarmed (`None`).
struct CancelOnDrop(Option<(Peer<RoleClient>, RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((upstream, id)) = self.0.take() else {
            return;
        };
        let params = CancelledNotificationParam::new(Some(id), Some(CANCELLED.to_owned()));
        let notification = ClientNotification::CancelledNotification(
            rmcp::model::CancelledNotification::new(params),
        );
        // Drop cannot wait; the notification goes out on its own.
        tokio::spawn(async move {
            let _ = upstream.send_notification(notification).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hosts_meta_goes_upstream_but_its_own_hop_does_not() {
        let host = json!({
            "progressToken": 7,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "host", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
            "idem/run_id": "run-1",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        });
        let host = RequestMetaObject::from(host.as_object().cloned().unwrap());
        let sent = serde_json::to_value(forwarded_meta(&host)).unwrap();
        assert_eq!(
            sent,
            json!({ "idem/run_id": "run-1",
                    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" })
        );
    }
}
