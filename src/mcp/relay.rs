//! One host request sent on to the upstream: its `_meta` goes along, progress on it comes
//! back to the host under the host's own token, and a request the host cancels (or the proxy
//! stops waiting for) is cancelled upstream too.

use rmcp::model::{
    CancelledNotificationParam, ClientNotification, ClientRequest, GetMeta, JsonObject, RequestId,
    RequestMetaObject, ServerResult,
};
use rmcp::service::{
    Peer, PeerRequestOptions, RequestContext, RoleClient, RoleServer, ServiceError,
};

use super::sessions::{ProgressRoute, Sessions};

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
    /// answer. The host cancelling its request ends the wait with `ServiceError::Cancelled`;
    /// either that or dropping the returned future (a timeout) sends the upstream
    /// `notifications/cancelled` for the request.
    pub async fn send(
        &self,
        mut request: ClientRequest,
        host: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ServiceError> {
        *request.get_meta_mut() = forwarded_meta(&host.meta);
        let host_token = host.meta.get_progress_token();
        // rmcp gives every upstream request a progress token of its own; hold the routes
        // while it is sent so progress cannot outrun its route.
        let mut routes = self.sessions.progress().await;
        let handle = self
            .upstream
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        let _route = host_token.map(|token| {
            let route = ProgressRoute {
                host: host.peer.clone(),
                token,
            };
            routes.insert(handle.progress_token.clone(), route);
            ForgetOnDrop(self.sessions.clone(), handle.progress_token.clone())
        });
        drop(routes);
        let mut cancel = CancelOnDrop(Some((self.upstream.clone(), handle.id.clone())));
        let answer = tokio::select! {
            // An answer that is in wins over a cancellation that came with it.
            biased;
            answer = handle.await_response() => answer,
            () = host.ct.cancelled() => {
                return Err(ServiceError::Cancelled { reason: Some("cancelled by the host".into()) })
            }
        };
        cancel.0 = None;
        answer
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

/// Removes a progress route when its request is over, however it ended.
struct ForgetOnDrop(Sessions, rmcp::model::ProgressToken);

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        self.0.forget_progress(self.1.clone());
    }
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
