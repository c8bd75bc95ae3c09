//! The host's sessions in front of the one upstream connection, and which of them each
//! upstream notification goes to.
//!
//! On stdio there is one session. With `--listen` every HTTP session of the host is one, and
//! they all share the proxy's single upstream connection, so a notification from the upstream
//! is routed by what it is about (`audience`): progress to the session whose request it
//! reports on, `resources/updated` to the sessions subscribed to that resource, and the rest
//! (list changes, log messages) to every session.

use rmcp::model::{
    ClientConfig, ClientResult, GetMeta, ProgressToken, ServerNotification, ServerRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer, Service};
use rmcp::ErrorData as McpError;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// How long a progress route outlives its request (see `Sessions::forget_progress`).
const PROGRESS_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// One host session, for as long as the proxy serves it.
pub type SessionId = uuid::Uuid;

/// Who an upstream notification is for.
#[derive(Debug, Clone, PartialEq)]
pub enum Audience {
    /// The session whose request the proxy sent with this (upstream) progress token.
    Requester(ProgressToken),
    /// The sessions subscribed to this resource URI.
    Subscribers(String),
    /// Every session: list changes, log messages, anything tied to no request or resource.
    Everyone,
    /// Nobody: the upstream cancelling a request of its own or acknowledging a subscription
    /// stream, neither of which the proxy makes on a host's behalf.
    Nobody,
}

/// Where an upstream notification goes (the routing table, kept pure to test it as one).
pub fn audience(notification: &ServerNotification) -> Audience {
    match notification {
        ServerNotification::ProgressNotification(progress) => {
            Audience::Requester(progress.params.progress_token.clone())
        }
        ServerNotification::ResourceUpdatedNotification(updated) => {
            Audience::Subscribers(updated.params.uri.clone())
        }
        ServerNotification::CancelledNotification(_)
        | ServerNotification::SubscriptionsAcknowledgedNotification(_) => Audience::Nobody,
        _ => Audience::Everyone,
    }
}

/// Where the upstream's progress on one forwarded request goes: the host session that asked
/// and the token the host chose.
#[derive(Clone)]
pub struct ProgressRoute {
    pub host: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Which sessions hold a subscription to which resource URI. The upstream sees one
/// subscription per URI: subscribed while any session is, unsubscribed when the last leaves.
#[derive(Debug, Default)]
pub struct Subscriptions(HashMap<String, HashSet<SessionId>>);

impl Subscriptions {
    /// `session` subscribes to `uri`.
    pub fn add(&mut self, uri: &str, session: SessionId) {
        self.0.entry(uri.to_owned()).or_default().insert(session);
    }

    /// `session` unsubscribes from `uri`; true when no session is subscribed any more, so
    /// the upstream subscription should end too.
    pub fn remove(&mut self, uri: &str, session: SessionId) -> bool {
        let Some(sessions) = self.0.get_mut(uri) else {
            return true;
        };
        sessions.remove(&session);
        let last = sessions.is_empty();
        if last {
            self.0.remove(uri);
        }
        last
    }

    /// `session` ended: the URIs nobody is subscribed to any more.
    pub fn leave(&mut self, session: SessionId) -> Vec<String> {
        let held: Vec<String> = self
            .0
            .iter()
            .filter(|(_, sessions)| sessions.contains(&session))
            .map(|(uri, _)| uri.clone())
            .collect();
        held.into_iter()
            .filter(|uri| self.remove(uri, session))
            .collect()
    }

    fn holders(&self, uri: &str) -> Vec<SessionId> {
        self.0
            .get(uri)
            .map(|sessions| sessions.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// The sessions the upstream's notifications go to; cheap to clone, one per proxy. It is
/// also the upstream connection's client-side service: rmcp hands it every notification
/// whole, and it passes each on unchanged (but for a progress token, mapped back to the
/// host's own).
#[derive(Clone, Default)]
pub struct Sessions {
    hosts: Arc<Mutex<HashMap<SessionId, Peer<RoleServer>>>>,
    // Held (async) while a request is sent upstream, so progress on it cannot arrive before
    // its route is known.
    progress: Arc<tokio::sync::Mutex<HashMap<ProgressToken, ProgressRoute>>>,
    // Held (async) across the upstream's `resources/(un)subscribe`, so that two sessions'
    // changes reach the upstream in the order they are counted.
    subscriptions: Arc<tokio::sync::Mutex<Subscriptions>>,
}

impl Sessions {
    /// The host session `id` can now be sent notifications (it completed its handshake, or
    /// sent a request).
    pub fn join(&self, id: SessionId, host: &Peer<RoleServer>) {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        hosts.entry(id).or_insert_with(|| host.clone());
    }

    /// The session ended: no more notifications; its subscriptions end, and the upstream's
    /// with them where it was the last subscriber.
    #[allow(deprecated)] // resources/unsubscribe: the legacy subscriptions hosts use today.
    pub async fn leave(&self, id: SessionId, upstream: &Peer<RoleClient>) {
        self.hosts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        let mut subscriptions = self.subscriptions.lock().await;
        for uri in subscriptions.leave(id) {
            let _ = upstream
                .unsubscribe(UnsubscribeRequestParams::new(uri))
                .await;
        }
    }

    /// The progress routes, locked.
    pub async fn progress(
        &self,
    ) -> tokio::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressRoute>> {
        self.progress.lock().await
    }

    /// Forgets a progress route once its request is answered or abandoned, after a grace:
    /// rmcp hands each notification to a task of its own, so progress the upstream sent just
    /// before its answer may be routed just after the answer arrived.
    pub fn forget_progress(&self, token: ProgressToken) {
        let progress = self.progress.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PROGRESS_GRACE).await;
            progress.lock().await.remove(&token);
        });
    }

    /// The subscriptions, locked.
    pub async fn subscriptions(&self) -> tokio::sync::MutexGuard<'_, Subscriptions> {
        self.subscriptions.lock().await
    }

    /// Sends an upstream notification to its audience.
    pub async fn deliver(&self, mut notification: ServerNotification) {
        let recipients: Vec<Peer<RoleServer>> = match audience(&notification) {
            Audience::Nobody => return,
            Audience::Requester(upstream_token) => {
                let Some(route) = self.progress.lock().await.get(&upstream_token).cloned() else {
                    return; // its request is answered: progress on it is over
                };
                if let ServerNotification::ProgressNotification(progress) = &mut notification {
                    progress.params.progress_token = route.token;
                }
                vec![route.host]
            }
            Audience::Subscribers(uri) => {
                let holders = self.subscriptions.lock().await.holders(&uri);
                let hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
                holders
                    .iter()
                    .filter_map(|id| hosts.get(id).cloned())
                    .collect()
            }
            Audience::Everyone => {
                let hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
                hosts.values().cloned().collect()
            }
        };
        for host in recipients {
            let notification = notification.clone();
            // One slow or departed host must not hold up the others.
            tokio::spawn(async move {
                if let Err(error) = host.send_notification(notification).await {
                    tracing::debug!(%error, "a host session did not take a notification");
                }
            });
        }
    }
}

/// The upstream connection's client side: notifications go to the hosts; requests from the
/// upstream (roots, sampling, elicitation) get rmcp's default answers, as before.
impl Service<RoleClient> for Sessions {
    async fn handle_request(
        &self,
        request: ServerRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        Service::<RoleClient>::handle_request(&(), request, context).await
    }

    async fn handle_notification(
        &self,
        mut notification: ServerNotification,
        context: NotificationContext<RoleClient>,
    ) -> Result<(), McpError> {
        // rmcp moved the notification's `_meta` into the context; it travels on unchanged.
        *notification.get_meta_mut() = context.meta;
        self.deliver(notification).await;
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

#[cfg(test)]
mod tests;
