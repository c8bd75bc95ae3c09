//! Rows a store keeps in memory, learnt from its own commits. First, the final outcomes
//! (succeeded, failed, rejected) of live keys, so that a replay is answered without a
//! database read.
//!
//! On SQLite only the store `idem serve` opened keeps them: it holds its file
//! (`SqliteStore::open_to_serve`), so it learns of every change from its own commits. After
//! every committed change to a row that was final, the store forgets that key before the
//! change's caller is answered; a read that raced the change cannot put the old row back
//! (see [`ReadCache`]). So once a resolve, an expire or a new attempt has returned, no claim
//! is answered from the row before it. On PostgreSQL other processes change rows too; there
//! each `idem serve` keeps them as a member of the protocol in `postgres::kept_members`,
//! which gives the same promise across processes.
//!
//! Second, the pending operations this store last wrote with a lease, by id: a
//! completion is decided from one instead of a database read. These are only hints: the
//! write a completion makes is guarded by the row's status, lease and time of last change
//! (see the SQLite ledger's `UnchangedUpdate` and the PostgreSQL ledger's
//! `write_if_unchanged`), so a row that moved since it was kept is
//! never overwritten; the completion is then decided again from the row under the lock.
//!
//! Third, keys seen with a live operation lately. Also only a hint: a claim of a key not
//! among them is tried as a new key's insert without reading first, and a key that is
//! taken after all is read then; one among them is read first. A key that stopped being
//! live since only costs its next claim that read.
//!
//! What is decided from a kept row is decided at `decision_time`: on PostgreSQL, whose
//! clock decides leases and expiry, the process clock plus the most the database's clock
//! was ahead of it at the member's last beat, so a lease is never taken for live when the
//! database's clock has passed its end.

use app::domain::{IdempotencyKey, Namespace, OperationStatus};
use app::ledger::{Decision, Operation, Write};
use app::read_cache::{FillTicket, ReadCache};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// How long a final outcome is kept; only memory turnover depends on it (entries are exact).
const MAX_AGE: Duration = Duration::from_secs(10);
/// At most this many outcomes are kept (an operation with its result is a few kB at most).
const CAPACITY: usize = 10_000;
/// How long a key is remembered as live, and how many are: a key forgotten only costs its
/// next claim one failed insert before the read.
const LIVE_KEYS_MAX_AGE: Duration = Duration::from_secs(60);
const LIVE_KEYS_CAPACITY: usize = 100_000;

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
    live_keys: ReadCache<(Namespace, IdempotencyKey), ()>,
    /// Added to the process clock to decide from a kept row: zero where the process clock is
    /// the database's (SQLite), else the most the database's clock can be ahead of it, so
    /// that a kept outcome is never replayed past its end of life by the database's clock.
    clock_ahead_micros: AtomicI64,
}

impl Default for KeptRows {
    fn default() -> Self {
        Self {
            cache: ReadCache::new(MAX_AGE, CAPACITY),
            leased: ReadCache::new(MAX_AGE, CAPACITY),
            live_keys: ReadCache::new(LIVE_KEYS_MAX_AGE, LIVE_KEYS_CAPACITY),
            clock_ahead_micros: AtomicI64::new(0),
        }
    }
}

/// Now, at the precision both databases keep (microseconds), by the process clock: SQLite's
/// time (a store on PostgreSQL adds how far the database's clock may be ahead).
pub(crate) fn now() -> DateTime<Utc> {
    let now = Utc::now();
    now.duration_trunc(TimeDelta::microseconds(1))
        .unwrap_or(now)
}

impl KeptRows {
    /// The key's final operation if kept, with the time to decide at (`decision_time`).
    pub fn get(
        &self,
        namespace: &Namespace,
        key: &IdempotencyKey,
    ) -> Option<(Operation, DateTime<Utc>)> {
        let operation = self.cache.get(&(namespace.clone(), key.clone()))?;
        Some((operation, self.decision_time()))
    }

    /// The time to decide at from what is kept: the process clock plus the most the
    /// database's clock can be ahead of it (zero on SQLite, whose time is the process's), so
    /// never earlier than the database's time.
    pub fn decision_time(&self) -> DateTime<Utc> {
        let ahead = self.clock_ahead_micros.load(Ordering::Relaxed);
        now() + TimeDelta::microseconds(ahead)
    }

    /// Sets how far the database's clock may be ahead of the process's (see `get`).
    pub fn set_clock_ahead(&self, ahead: TimeDelta) {
        let micros = ahead.num_microseconds().unwrap_or(i64::MAX);
        self.clock_ahead_micros.store(micros, Ordering::Relaxed);
    }

    /// Forgets the key's final outcome, and turns away every fill read before now.
    pub fn forget(&self, namespace: &Namespace, key: &IdempotencyKey) {
        self.cache.invalidate(&(namespace.clone(), key.clone()));
    }

    /// Forgets every final outcome and leased row, and turns away every fill read before now.
    pub fn forget_all(&self) {
        self.cache.invalidate_all();
        self.leased.invalidate_all();
    }

    /// Whether committed writes changed a row that may be kept as a final outcome (see
    /// `forget_changed`).
    pub fn replaced_final(writes: &[Write]) -> bool {
        writes.iter().any(|write| match write {
            Write::Update {
                expected_status, ..
            } => expected_status.is_final(),
            Write::Retire { .. } => true,
            Write::Insert(_) => false,
        })
    }

    /// The pending operation `id` as this store last wrote it with a lease, if kept, with
    /// the time to decide at. A hint, to be written only where the row is unchanged.
    pub fn leased(&self, id: Uuid) -> Option<(Operation, DateTime<Utc>)> {
        Some((self.leased.get(&id)?, self.decision_time()))
    }

    /// Whether the key was seen with a live operation lately (see the module's note).
    pub fn seen_live(&self, namespace: &Namespace, key: &IdempotencyKey) -> bool {
        self.live_keys
            .get(&(namespace.clone(), key.clone()))
            .is_some()
    }

    /// Remembers that the key has a live operation: a read found it, or an insert found the
    /// key taken.
    pub fn saw_live(&self, namespace: &Namespace, key: &IdempotencyKey) {
        let key = (namespace.clone(), key.clone());
        self.live_keys.fill(self.live_keys.ticket(), key, ());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// On PostgreSQL a kept row is decided on at the latest time the database's clock can
    /// show: the process clock moved by how far the last beat found the database's ahead
    /// (or behind).
    #[test]
    fn kept_rows_are_decided_on_at_the_database_time_the_beats_bound() {
        let kept = KeptRows::default();
        let before = now();
        assert!(kept.decision_time() >= before, "SQLite: the process clock");

        kept.set_clock_ahead(TimeDelta::hours(1));
        let ahead = kept.decision_time();
        assert!(ahead >= before + TimeDelta::hours(1));
        assert!(ahead <= now() + TimeDelta::hours(1));

        kept.set_clock_ahead(TimeDelta::seconds(-5));
        assert!(kept.decision_time() < now() - TimeDelta::seconds(4));
    }
}
