//! Operation changes as a stream: every committed change of an operation's state is published
//! to a [`Changes`] handle, which live views (the dashboard, `GET /v1/operations/changes`)
//! subscribe to. The stores publish; on PostgreSQL a change travels through the database
//! (`NOTIFY`), so every process sees every process's changes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use super::model::Operation;
use super::write::Write;
use crate::domain::{Namespace, OperationStatus};

/// How many changes a slow subscriber may fall behind before it misses some.
const BUFFER: usize = 1024;

/// One committed change: the operation, where it now stands, and when it moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct OperationChange {
    pub id: Uuid,
    pub namespace: Namespace,
    pub status: OperationStatus,
    pub at: DateTime<Utc>,
}

impl From<&Operation> for OperationChange {
    fn from(operation: &Operation) -> Self {
        Self {
            id: operation.id,
            namespace: operation.namespace.clone(),
            status: operation.status,
            at: operation.updated_at,
        }
    }
}

impl OperationChange {
    /// The changes a batch of writes makes visible. Retiring an operation changes no status
    /// (the claim that retires it inserts its successor, which is announced).
    pub fn of_writes(writes: &[Write]) -> Vec<Self> {
        writes
            .iter()
            .filter_map(|write| match write {
                Write::Insert(operation)
                | Write::Update {
                    after: operation, ..
                } => Some(Self::from(operation)),
                Write::Retire { .. } => None,
            })
            .collect()
    }
}

/// The process's stream of operation changes; cloning shares it.
#[derive(Clone)]
pub struct Changes {
    sender: broadcast::Sender<OperationChange>,
    /// Set when the process stops, so open streams end instead of holding the graceful
    /// shutdown open forever.
    closing: Arc<watch::Sender<bool>>,
}

impl Default for Changes {
    fn default() -> Self {
        Self::new()
    }
}

impl Changes {
    pub fn new() -> Self {
        Self {
            sender: broadcast::channel(BUFFER).0,
            closing: Arc::new(watch::channel(false).0),
        }
    }

    /// Tells every current subscriber; nobody listening is not an error.
    pub fn publish(&self, change: OperationChange) {
        let _ = self.sender.send(change);
    }

    /// Whether anyone in this process subscribes now: when nobody does, a change heard from
    /// elsewhere need not even be read.
    pub fn is_watched(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Every change published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<OperationChange> {
        self.sender.subscribe()
    }

    /// Tells every subscriber that the process is stopping.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Completes once [`Changes::close`] was called.
    pub async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        let _ = closing.wait_for(|closed| *closed).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_watched_while_someone_subscribes() {
        let changes = Changes::new();
        assert!(!changes.is_watched());
        let subscriber = changes.subscribe();
        assert!(changes.clone().is_watched());
        drop(subscriber);
        assert!(!changes.is_watched());
    }
}
