//! Rows a store keeps in memory, learnt from its own commits. First, the final outcomes
//! (succeeded, failed, rejected) of live keys, so that a replay is answered without a
//! database read.
//!
//! Only a store that alone changes its database may keep them, since it learns of changes
//! from its own commits: SQLite opened by `idem serve`, which holds its file
//! (`SqliteStore::open_to_serve`). After
//! every committed change to a row that was final, the store forgets that key before the
//! change's caller is answered; a read that raced the change cannot put the old row back
//! (see [`ReadCache`]). So once a resolve, an expire or a new attempt has returned, no claim
//! is answered from the row before it.
//!
//! Second, the pending operations this store last wrote with a lease, by id: a
//! completion is decided from one instead of a database read. These are only hints: the
//! write a completion makes is guarded by the row's status, lease and time of last change
//! (see the SQLite ledger's `stage_if_unchanged`), so a row that moved since it was kept is
//! never overwritten; the completion is then decided again from the row under the lock.

use app::domain::{IdempotencyKey, Namespace, OperationStatus};
use app::ledger::{Decision, Operation, Write};
use app::read_cache::{FillTicket, ReadCache};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::time::Duration;
use uuid::Uuid;

/// How long a final outcome is kept; only memory turnover depends on it (entries are exact).
const MAX_AGE: Duration = Duration::from_secs(10);
/// At most this many outcomes are kept (an operation with its result is a few kB at most).
const CAPACITY: usize = 10_000;

/// What a committed change wrote: a decision, or none (no such operation).
pub trait MadeWrites {
    fn writes(&self) -> &[Write];
}

impl<T> MadeWrites for Decision<T> {
    fn writes(&self) -> &[Write] {
        &self.writes
    }
}

impl<T> MadeWrites for Option<Decision<T>> {
    fn writes(&self) -> &[Write] {
        self.as_ref().map_or(&[], |decision| &decision.writes)
    }
}

/// Final outcomes by `(namespace, key)`, and leased pending operations by id.
pub struct KeptRows {
    cache: ReadCache<(Namespace, IdempotencyKey), Operation>,
    leased: ReadCache<Uuid, Operation>,
}

impl Default for KeptRows {
    fn default() -> Self {
        Self {
            cache: ReadCache::new(MAX_AGE, CAPACITY),
            leased: ReadCache::new(MAX_AGE, CAPACITY),
        }
    }
}

/// Now, at the precision both databases keep (microseconds), by the process clock: the
/// clock of the only store that keeps rows in memory (SQLite's, which decides its time).
pub(crate) fn now() -> DateTime<Utc> {
    let now = Utc::now();
    now.duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or(now)
}

impl KeptRows {
    /// The key's final operation if kept, with the time to decide at: the process clock,
    /// which is the clock of the only store that keeps final outcomes (SQLite's).
    pub fn get(
        &self,
        namespace: &Namespace,
        key: &IdempotencyKey,
    ) -> Option<(Operation, DateTime<Utc>)> {
        let operation = self.cache.get(&(namespace.clone(), key.clone()))?;
        Some((operation, now()))
    }

    /// The pending operation `id` as this store last wrote it with a lease, if kept, with
    /// the time to decide at. A hint, to be written only where the row is unchanged.
    pub fn leased(&self, id: Uuid) -> Option<(Operation, DateTime<Utc>)> {
        Some((self.leased.get(&id)?, now()))
    }

    /// To be taken before reading a key's live operation.
    pub fn ticket(&self) -> FillTicket {
        self.cache.ticket()
    }

    /// Keeps the live operation read with `ticket`, if it is final.
    pub fn keep(&self, ticket: FillTicket, operation: &Operation) {
        if operation.status.is_final() {
            let key = (operation.namespace.clone(), operation.key.clone());
            self.cache.fill(ticket, key, operation.clone());
        }
    }

    /// Learns from committed writes, before their caller is answered: keeps each operation
    /// left pending with a lease, drops every other one it kept as leased, and forgets the
    /// final outcomes they changed.
    pub fn committed(&self, writes: &[Write]) {
        for write in writes {
            let (Write::Insert(operation)
            | Write::Update {
                after: operation, ..
            }) = write
            else {
                continue;
            };
            if operation.status == OperationStatus::Pending && operation.lease.is_some() {
                self.leased
                    .fill(self.leased.ticket(), operation.id, operation.clone());
            } else {
                self.leased.invalidate(&operation.id);
            }
        }
        self.forget_changed(writes);
    }

    /// Forgets the keys whose final row these committed writes changed: an update of a
    /// final operation (an expiry, a new attempt after a retryable failure), or a key whose
    /// operation was retired for a successor.
    fn forget_changed(&self, writes: &[Write]) {
        let retired = writes.iter().any(|w| matches!(w, Write::Retire { .. }));
        for write in writes {
            let changed = match write {
                Write::Update {
                    after,
                    expected_status,
                } if expected_status.is_final() => after,
                Write::Insert(successor) if retired => successor,
                _ => continue,
            };
            self.cache
                .invalidate(&(changed.namespace.clone(), changed.key.clone()));
        }
    }
}
