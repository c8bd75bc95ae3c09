//! Final outcomes kept in memory on PostgreSQL, where other processes change the database
//! too: a replay is answered without a read, and still never from a row another process has
//! replaced once that process has answered.
//!
//! Every process is a member (table `kept_members`): it listens to the operation
//! announcements (`idem_operations`; for a change that replaced a final outcome or retired
//! an operation, sent by a trigger inside its transaction, so delivered when it commits)
//! and forgets the key of each, and it holds a lease renewed by a
//! beat every second. A change that replaced a final outcome (an expiry by hand, a new
//! attempt) takes a *fence* after it commits — a number from `kept_fences`, notified on
//! `idem_kept_fences` — and answers its caller only once every member whose lease is live
//! says it has seen that fence or a later one. PostgreSQL delivers notifications in commit
//! order, so a member that saw the fence has already forgotten the replaced outcome.
//!
//! A member answers from memory only while it is sure the others would wait for it: until
//! its lease, as its own clock counts from before the beat that set it, less a margin; and
//! only once that beat came back through its listener, which proves the listener is alive
//! and has delivered everything committed before the beat. A member whose listener lost its
//! connection forgets everything and stops answering from memory until its next beat comes
//! back. A member that stops beating is waited for only until its lease ends. Each start of
//! answering from memory forgets everything first, so no row read before it survives.

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::postgres::PgPool;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use uuid::Uuid;

use crate::storage::kept_rows::KeptRows;
use app::domain::{IdempotencyKey, Namespace};
use app::store_error::StoreError;

use crate::storage::store_error;

/// The channel fences are notified on.
pub(super) const FENCES_CHANNEL: &str = "idem_kept_fences";
/// How often a member renews its lease.
pub(super) const BEAT: Duration = Duration::from_secs(1);
/// How long a lease lasts, from the database's time of the beat.
const LEASE_SECONDS: i64 = 5;
/// How long before its lease ends (by its own clock) a member stops answering from memory:
/// room for the two clocks to run at slightly different rates.
const MARGIN: Duration = Duration::from_secs(1);
/// How often a change polls for the members' acknowledgements.
const POLL: Duration = Duration::from_millis(2);

/// This process's membership, and the rows it keeps.
pub(super) struct Membership {
    id: Uuid,
    rows: KeptRows,
    started: Instant,
    /// Until when (micros after `started`) this member answers from memory; 0: it does not.
    serving_until: AtomicU64,
    last_beat: Mutex<LastBeat>,
    beating: AtomicBool,
}

/// The last beat sent, until it is both renewed (its statement answered) and back (its
/// fence came through the listener) — which of the two comes first is a race between two
/// connections, so either order completes it.
#[derive(Default)]
struct LastBeat {
    sent: Option<SentBeat>,
    /// The listener reconnected since: beat again even if `sent` never came back.
    lost: bool,
}

#[derive(Clone, Copy)]
struct SentBeat {
    fence: i64,
    sent_at: Instant,
    /// Once renewed: the most the database's clock can be ahead of this process's.
    clock_ahead: Option<TimeDelta>,
    back: bool,
}

/// A beat both renewed and back: the member may answer from memory until `sent_at` plus the
/// lease, less the margin.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CompletedBeat {
    sent_at: Instant,
    clock_ahead: TimeDelta,
}

impl LastBeat {
    fn may_beat(&self) -> bool {
        self.sent.is_none() || self.lost
    }

    fn send(&mut self, fence: i64, sent_at: Instant) {
        self.sent = Some(SentBeat {
            fence,
            sent_at,
            clock_ahead: None,
            back: false,
        });
    }

    /// Its statement answered.
    fn renewed(&mut self, fence: i64, clock_ahead: TimeDelta) -> Option<CompletedBeat> {
        self.lost = false;
        let sent = self.sent.as_mut().filter(|sent| sent.fence == fence)?;
        sent.clock_ahead = Some(clock_ahead);
        self.complete()
    }

    /// Its fence came through the listener.
    fn back(&mut self, fence: i64) -> Option<CompletedBeat> {
        let sent = self.sent.as_mut().filter(|sent| sent.fence == fence)?;
        sent.back = true;
        self.complete()
    }

    /// Whether it is unknown if the beat's statement committed: it must not count if its
    /// fence comes back.
    fn failed(&mut self, fence: i64) {
        if self.sent.is_some_and(|sent| sent.fence == fence) {
            self.sent = None;
        }
    }

    fn complete(&mut self) -> Option<CompletedBeat> {
        let sent = self.sent.filter(|sent| sent.back)?;
        let clock_ahead = sent.clock_ahead?;
        self.sent = None;
        Some(CompletedBeat {
            sent_at: sent.sent_at,
            clock_ahead,
        })
    }
}

impl Membership {
    pub(super) fn new() -> Self {
        Self {
            id: Uuid::new_v4(),
            rows: KeptRows::default(),
            started: Instant::now(),
            serving_until: AtomicU64::new(0),
            last_beat: Mutex::new(LastBeat::default()),
            beating: AtomicBool::new(false),
        }
    }

    /// True the first time only: the caller starts the beat.
    pub(super) fn start_beating(&self) -> bool {
        !self.beating.swap(true, Ordering::AcqRel)
    }

    /// The rows kept in memory, while this member may answer from them.
    pub(super) fn rows(&self) -> Option<&KeptRows> {
        let until = self.serving_until.load(Ordering::Acquire);
        (self.micros_since_start(Instant::now()) < until).then_some(&self.rows)
    }

    fn micros_since_start(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_micros()).unwrap_or(u64::MAX)
    }

    /// Renews the lease (joining on the first beat), with a fence this member will see come
    /// back: unless the last beat has not come back, in which case the listener may be deaf
    /// and the lease is left to run out (the others then stop waiting for this member).
    pub(super) async fn beat(&self, pool: &PgPool) -> Result<(), StoreError> {
        if !self.last_beat.lock().expect("beat lock").may_beat() {
            return Ok(());
        }
        // The fence's number is known before it is notified, so that its coming back is
        // recognised however soon it comes.
        let (fence,): (i64,) = sqlx::query_as("select nextval('kept_fences')")
            .fetch_one(pool)
            .await
            .map_err(store_error)?;
        // The clock is read once the connection is in hand, so that a wait for the pool
        // does not count as the database's clock being ahead.
        let mut conn = pool.acquire().await.map_err(store_error)?;
        let sent_at = Instant::now();
        let before = Utc::now();
        self.last_beat
            .lock()
            .expect("beat lock")
            .send(fence, sent_at);
        let renewed: Result<(DateTime<Utc>,), _> = sqlx::query_as(
            "with member as (insert into kept_members (id, lease_until, seen_through) \
               values ($1, clock_timestamp() + make_interval(secs => $2), $3) \
               on conflict (id) do update set lease_until = excluded.lease_until), \
             gone as (delete from kept_members \
               where lease_until < clock_timestamp() - interval '1 hour') \
             select clock_timestamp() from pg_notify($4, $3::text)",
        )
        .bind(self.id)
        .bind(LEASE_SECONDS as f64)
        .bind(fence)
        .bind(FENCES_CHANNEL)
        .fetch_one(&mut *conn)
        .await;
        let mut last = self.last_beat.lock().expect("beat lock");
        match renewed {
            Ok((database_now,)) => {
                if let Some(completed) = last.renewed(fence, database_now - before) {
                    self.serve_after(completed);
                }
                Ok(())
            }
            Err(error) => {
                last.failed(fence);
                Err(store_error(error))
            }
        }
    }

    /// A beat completed: extends how long this member answers from memory, forgetting
    /// everything first if it was not answering (nothing read before may survive).
    fn serve_after(&self, beat: CompletedBeat) {
        let lease = Duration::from_secs(LEASE_SECONDS.unsigned_abs()) - MARGIN;
        let until = self.micros_since_start(beat.sent_at + lease);
        if self.rows().is_none() {
            self.rows.forget_all();
        }
        self.rows.set_clock_ahead(beat.clock_ahead);
        self.serving_until.store(until, Ordering::Release);
    }

    /// An announced change of a key: its kept outcome, if any, is no longer the live row.
    pub(super) fn changed(&self, namespace: &Namespace, key: &IdempotencyKey) {
        self.rows.forget(namespace, key);
    }

    /// An announcement this member could not read: it forgets everything.
    pub(super) fn changed_unknown(&self) {
        self.rows.forget_all();
    }

    /// The listener lost its connection: what was announced meanwhile is lost, so this
    /// member forgets everything and stops answering from memory until a beat comes back.
    /// `listening` says the listener is already back (a beat sent now will come back).
    pub(super) fn listener_lost(&self, listening: bool) {
        self.serving_until.store(0, Ordering::Release);
        self.rows.forget_all();
        self.last_beat.lock().expect("beat lock").lost = listening;
    }

    /// The listener delivered something: it is listening (again).
    pub(super) fn listening(&self) {
        let mut last = self.last_beat.lock().expect("beat lock");
        if last.sent.is_some() && self.serving_until.load(Ordering::Acquire) == 0 {
            last.lost = true;
        }
    }

    /// A fence came through the listener: everything committed before it has been seen.
    /// Says so in the member's row; if it is this member's own beat, the beat may complete.
    pub(super) async fn fence_seen(&self, fence: i64, pool: &PgPool) -> Result<(), StoreError> {
        let completed = self.last_beat.lock().expect("beat lock").back(fence);
        if let Some(completed) = completed {
            self.serve_after(completed);
        }
        sqlx::query(
            "update kept_members set seen_through = greatest(seen_through, $2) where id = $1",
        )
        .bind(self.id)
        .bind(fence)
        .execute(pool)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Leaves: the others stop waiting for this member at once.
    pub(super) async fn leave(&self, pool: &PgPool) {
        self.serving_until.store(0, Ordering::Release);
        let left = sqlx::query("delete from kept_members where id = $1")
            .bind(self.id)
            .execute(pool)
            .await;
        if let Err(error) = left {
            tracing::warn!(%error, "could not leave the kept-outcome members; the lease will run out");
        }
    }
}

/// After a commit that replaced a final outcome: waits until every member with a live lease
/// has seen a fence taken now, so none still answers with the replaced outcome. A member that
/// does not answer is waited for until its lease ends. A member renews only while it hears
/// its own beats and acknowledges every fence it hears, so the wait is bounded by a lease;
/// should it last twice that anyway (a fault this protocol does not foresee), the change is
/// answered with an error in the log rather than never.
pub(super) async fn fence(pool: &PgPool) -> Result<(), StoreError> {
    let deadline = Instant::now() + 2 * Duration::from_secs(LEASE_SECONDS.unsigned_abs());
    let (fence,): (i64,) = sqlx::query_as(
        "select number from (select nextval('kept_fences') as number) as fence, \
         lateral (select pg_notify($1, number::text)) as notified",
    )
    .bind(FENCES_CHANNEL)
    .fetch_one(pool)
    .await
    .map_err(store_error)?;
    loop {
        let (behind,): (i64,) = sqlx::query_as(
            "select count(*) from kept_members \
             where lease_until > clock_timestamp() and seen_through < $1",
        )
        .bind(fence)
        .fetch_one(pool)
        .await
        .map_err(store_error)?;
        if behind == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            tracing::error!(
                fence,
                behind,
                "members with a live lease never acknowledged a fence"
            );
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::PostgresStore;
    use crate::storage::backend::SqlBackend as _;
    use crate::storage::backend::SqlStore;
    use crate::storage::ledger_sql::LedgerBackend as _;

    /// The ledger on a PostgreSQL store.
    type Store = SqlStore<PostgresStore>;
    use crate::storage::conformance::ledger::{complete, fresh, request, start};
    use crate::storage::testing::{Backend, TestDatabase};
    use app::ledger::{Claim, ClaimRequest, LedgerStore, Operation, Settlement};

    /// A store as `idem serve` opens it, migrated, once it answers from memory.
    pub(in crate::storage::postgres) async fn serving(db: &TestDatabase) -> Store {
        let store = PostgresStore::open_to_serve(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        for _ in 0..1000 {
            if store.kept().is_some() {
                return SqlStore(store);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the store never started answering from memory");
    }

    /// `order` claimed and completed through `store`, then replayed there once, which keeps
    /// its outcome in memory.
    async fn kept_outcome(store: &Store, order: &ClaimRequest) -> Operation {
        let (started, token) = start(store, order).await;
        complete(store, order, started.id, &token, "agent:t")
            .await
            .unwrap();
        // A replay read while the completion's announcement was still on its way may be
        // kept and then forgotten when it arrives: kept only counts once a fence taken after
        // the replay has been seen, i.e. once every earlier announcement has arrived.
        for _ in 0..100 {
            let replay = store.claim(order, "agent:t", fresh()).await.unwrap();
            assert!(matches!(replay.outcome, Claim::Replayed { .. }));
            super::fence(&store.0.pool).await.unwrap();
            if store
                .0
                .kept()
                .unwrap()
                .get(&order.namespace, &order.key)
                .is_some()
            {
                return started;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("a replay never kept the outcome");
    }

    /// A person ends the operation's key's life through `store`; it answers once done.
    async fn expire(store: &Store, id: uuid::Uuid) {
        let expiry = Settlement::Expire {
            reason: "ended by hand".into(),
        };
        let expired = store.settle(id, &expiry, "person:ops").await;
        assert!(
            matches!(expired, Ok(Some(ref d)) if d.outcome.is_ok()),
            "{expired:?}"
        );
    }

    /// The case the fences exist for: a person ends a key's life through one process, which
    /// nothing in the kept row could tell another process. Once the expiry has answered, the
    /// other process has forgotten the outcome and the next claim starts a new operation.
    #[tokio::test]
    async fn an_expiry_through_one_process_is_never_replayed_from_another_ones_memory() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let first = serving(&db).await;
        let second = serving(&db).await;
        let order = request("billing", "order-1", "refund");
        let operation = kept_outcome(&first, &order).await;

        expire(&second, operation.id).await;
        let kept = first
            .0
            .kept()
            .and_then(|rows| rows.get(&order.namespace, &order.key));
        assert!(kept.is_none(), "forgotten before the expiry answered");
        let next = first.claim(&order, "agent:t", fresh()).await.unwrap();
        assert!(
            matches!(next.outcome, Claim::Started { operation: ref new, .. } if new.id != operation.id),
            "{:?}",
            next.outcome
        );
        first.0.close().await;
        second.0.close().await;
    }

    /// A member that stopped acknowledging (a process that died) holds a change up only
    /// until its lease ends.
    #[tokio::test]
    async fn a_silent_member_is_waited_for_only_until_its_lease_ends() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = serving(&db).await;
        let order = request("billing", "order-2", "refund");
        let (started, token) = start(&store, &order).await;
        complete(&store, &order, started.id, &token, "agent:t")
            .await
            .unwrap();
        let silent = uuid::Uuid::new_v4();
        sqlx::query(
            "insert into kept_members (id, lease_until, seen_through) \
             values ($1, clock_timestamp() + interval '1 second', 0)",
        )
        .bind(silent)
        .execute(&store.0.pool)
        .await
        .unwrap();

        expire(&store, started.id).await;
        let (lapsed,): (bool,) = sqlx::query_as(
            "select lease_until <= clock_timestamp() from kept_members where id = $1",
        )
        .bind(silent)
        .fetch_one(&store.0.pool)
        .await
        .unwrap();
        assert!(
            lapsed,
            "the expiry answered only once the silent lease had ended"
        );
        store.0.close().await;
    }

    /// A member whose listener lost its connection may have missed announcements: it
    /// forgets everything, and answers from memory again only after a beat came back.
    #[tokio::test]
    async fn a_member_whose_listener_was_cut_off_forgets_what_it_kept() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = serving(&db).await;
        let order = request("billing", "order-3", "refund");
        kept_outcome(&store, &order).await;

        let (cut,): (i64,) = sqlx::query_as(
            "select count(pg_terminate_backend(pid)) from pg_stat_activity \
             where datname = current_database() and query like 'LISTEN%'",
        )
        .fetch_one(&store.0.pool)
        .await
        .unwrap();
        assert_eq!(cut, 1, "one listener");
        // Well within the 10 s a kept outcome lives anyway.
        for _ in 0..500 {
            let forgotten = store
                .0
                .kept()
                .map(|rows| rows.get(&order.namespace, &order.key).is_none());
            if forgotten == Some(true) {
                store.0.close().await;
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the member did not come back without what it kept");
    }

    /// The beat's statement and its fence arrive by two connections, in either order; the
    /// beat completes once, when both have (found under load: counting only the order
    /// "answered, then back" stalled the beats for good).
    #[test]
    fn a_beat_completes_when_renewed_and_back_in_either_order() {
        let sent_at = std::time::Instant::now();
        let ahead = chrono::TimeDelta::milliseconds(3);
        let expected = Some(super::CompletedBeat {
            sent_at,
            clock_ahead: ahead,
        });

        let mut answered_first = super::LastBeat::default();
        answered_first.send(7, sent_at);
        assert_eq!(answered_first.renewed(7, ahead), None);
        assert_eq!(answered_first.back(6), None, "another member's fence");
        assert_eq!(answered_first.back(7), expected);
        assert!(answered_first.may_beat());

        let mut back_first = super::LastBeat::default();
        back_first.send(8, sent_at);
        assert_eq!(back_first.back(8), None);
        assert!(!back_first.may_beat(), "not renewed yet");
        assert_eq!(back_first.renewed(8, ahead), expected);
        assert_eq!(back_first.back(8), None, "completes once");

        let mut failed = super::LastBeat::default();
        failed.send(9, sent_at);
        failed.failed(9);
        assert_eq!(
            failed.back(9),
            None,
            "a beat that may not have committed never counts"
        );
        assert!(failed.may_beat());
    }

    /// Beats go on: a member still answers from memory after its first lease has ended.
    #[tokio::test]
    async fn a_member_keeps_answering_from_memory_beyond_its_first_lease() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = serving(&db).await;
        tokio::time::sleep(std::time::Duration::from_secs(
            super::LEASE_SECONDS as u64 + 1,
        ))
        .await;
        assert!(store.0.kept().is_some(), "its beats renewed the lease");
        store.0.close().await;
    }

    /// The row of a member that died without leaving goes with a later beat, an hour on.
    #[tokio::test]
    async fn a_long_dead_member_is_cleared_away() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let command = PostgresStore::open(db.url()).await.unwrap();
        command.migrate().await.unwrap();
        let dead = uuid::Uuid::new_v4();
        sqlx::query(
            "insert into kept_members (id, lease_until, seen_through) \
             values ($1, clock_timestamp() - interval '2 hours', 0)",
        )
        .bind(dead)
        .execute(&command.pool)
        .await
        .unwrap();

        let store = serving(&db).await;
        let (left,): (i64,) = sqlx::query_as("select count(*) from kept_members where id = $1")
            .bind(dead)
            .fetch_one(&command.pool)
            .await
            .unwrap();
        assert_eq!(left, 0);
        store.0.close().await;
        command.close().await;
    }

    /// A process that only runs a command (not `idem serve`) keeps nothing.
    #[tokio::test]
    async fn only_a_serving_store_keeps_outcomes() {
        let db = TestDatabase::create(Backend::Postgres).await;
        let store = PostgresStore::open(db.url()).await.unwrap();
        store.migrate().await.unwrap();
        assert!(store.kept().is_none());
        store.close().await;
    }
}
