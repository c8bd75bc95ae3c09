//! The host's sessions in front of the one upstream connection, and which of them each
//! upstream notification goes to.
//!
//! On stdio there is one session. With `--listen` every HTTP session of the host is one, and
//! they all share the proxy's single upstream connection, so a notification from the upstream
//! is routed by what it is about (`audience`): progress to the request it reports on,
//! `resources/updated` to the sessions subscribed to that resource, and the rest (list
//! changes, log lines) to every session.
//!
//! Order matters (progress counts up; log lines tell a story), and rmcp runs each
//! notification it receives on a task of its own, which loses it. So the upstream connection
//! is read through `upstream::InOrder`, which hands each notification to `dispatch` as it
//! arrives; each session then gets its notifications from one queue, in that order, and a
//! request's progress goes to the task waiting for its answer, which passes it on first.

use rmcp::model::{
    GetMeta, ProgressNotification, ProgressNotificationParam, ProgressToken, ServerNotification,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RoleServer};
use rmcp::ClientHandler;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// One host session, for as long as the proxy serves it.
pub type SessionId = uuid::Uuid;

/// Who an upstream notification is for.
#[derive(Debug, Clone, PartialEq)]
pub enum Audience {
    /// The request the proxy sent upstream with this progress token (the task waiting for
    /// its answer passes progress on to the session that asked).
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

/// The sessions the upstream's notifications go to; cheap to clone, one per proxy.
#[derive(Clone, Default)]
pub struct Sessions {
    // Each session's queue of notifications, sent on in order by a task of its own.
    hosts: Arc<Mutex<HashMap<SessionId, Queue>>>,
    // The progress on each request in flight, by the proxy's (upstream) progress token, to
    // the task waiting for the request's answer.
    progress: Arc<Mutex<HashMap<ProgressToken, Queue>>>,
    subscriptions: Arc<Mutex<Subscriptions>>,
    // Held across an upstream `resources/(un)subscribe`, so that two sessions' changes
    // reach the upstream in the order they are counted.
    subscribing: Arc<tokio::sync::Mutex<()>>,
}

type Queue = UnboundedSender<ServerNotification>;

/// Locks a mutex that no code holds across a panic it could leave half done.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sessions {
    /// The host session `id` can now be sent notifications (it completed its handshake, or
    /// sent a request).
    pub fn join(&self, id: SessionId, host: &Peer<RoleServer>) {
        let mut hosts = locked(&self.hosts);
        if hosts.contains_key(&id) {
            return;
        }
        let (queue, mut notifications) = unbounded_channel::<ServerNotification>();
        let host = host.clone();
        tokio::spawn(async move {
            while let Some(notification) = notifications.recv().await {
                if let Err(error) = host.send_notification(notification).await {
                    tracing::debug!(%error, "a host session went away");
                    break;
                }
            }
        });
        hosts.insert(id, queue);
    }

    /// The session ended: no more notifications; its subscriptions end, and the upstream's
    /// with them where it was the last subscriber.
    #[allow(deprecated)] // resources/unsubscribe: the legacy subscriptions hosts use today.
    pub async fn leave(&self, id: SessionId, upstream: &Peer<RoleClient>) {
        locked(&self.hosts).remove(&id);
        let _changing = self.subscribing.lock().await;
        let ended = locked(&self.subscriptions).leave(id);
        for uri in ended {
            let _ = upstream
                .unsubscribe(UnsubscribeRequestParams::new(uri))
                .await;
        }
    }

    /// Routes the upstream's progress on a request just sent (with `token`) to the receiver,
    /// until `forget_progress`.
    pub fn expect_progress(&self, token: ProgressToken) -> UnboundedReceiver<ServerNotification> {
        let (queue, progress) = unbounded_channel();
        locked(&self.progress).insert(token, queue);
        progress
    }

    /// The request is over: so is progress on it.
    pub fn forget_progress(&self, token: &ProgressToken) {
        locked(&self.progress).remove(token);
    }

    /// Serializes changes of subscriptions (hold it across the upstream's answer).
    pub async fn changing_subscriptions(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.subscribing.lock().await
    }

    /// Which session holds which subscription.
    pub fn subscriptions(&self) -> MutexGuard<'_, Subscriptions> {
        locked(&self.subscriptions)
    }

    /// Queues an upstream notification for its audience, at once (it is called as the
    /// notification is read off the connection, and must not wait). False for those the
    /// proxy leaves to rmcp: the upstream's own cancellations, and progress on a request
    /// whose route is not known yet (see `ClientHandler::on_progress` below).
    pub fn dispatch(&self, notification: &ServerNotification) -> bool {
        let queues: Vec<Queue> = match audience(notification) {
            Audience::Nobody => return false,
            Audience::Requester(token) => match locked(&self.progress).get(&token) {
                Some(queue) => vec![queue.clone()],
                None => return false,
            },
            Audience::Subscribers(uri) => {
                let holders = locked(&self.subscriptions).holders(&uri);
                let hosts = locked(&self.hosts);
                holders
                    .iter()
                    .filter_map(|id| hosts.get(id).cloned())
                    .collect()
            }
            Audience::Everyone => locked(&self.hosts).values().cloned().collect(),
        };
        for queue in queues {
            // A closed queue is a session or a request that just ended.
            let _ = queue.send(notification.clone());
        }
        true
    }
}

/// The upstream connection's client side, for what `dispatch` leaves to rmcp: requests
/// from the upstream (roots, sampling, elicitation) get rmcp's default answers, and progress
/// that outran its request's route (the request was sent upstream before its route was
/// recorded) is routed now, when rmcp gets to it.
impl ClientHandler for Sessions {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let mut progress =
            ServerNotification::ProgressNotification(ProgressNotification::new(params));
        *progress.get_meta_mut() = context.meta;
        self.dispatch(&progress);
    }
}

#[cfg(test)]
mod tests;
