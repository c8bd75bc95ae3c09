//! The Ledger service: parses what an agent sends into a claim, drives the rules over the
//! store, and keeps namespaces apart.

use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

use super::changes::Changes;
use super::claim::{Claim, Fresh};
use super::complete::Report;
use super::error::LedgerError;
use super::model::{ClaimRequest, Event, Operation, Runner};
use super::notify::{newly_requested, ApprovalNotifier};
use super::prepare::{check_request, prepare_claim};
use super::provider::Provider;
use super::sent_claim::SentClaim;
use super::store::{EventPage, EventPosition, LedgerStore, OperationFilter, RegisteredTool};
use super::telemetry::Telemetry;
use super::verdict::Verdict;
use super::write::Decision;
use crate::domain::{Guarantee, Namespace, OperationStatus, ToolName, ToolPolicy};
use crate::read_cache::ReadCache;
use crate::store_error::StoreError;

/// A page of an operation's events, and the position after which the next page starts.
#[derive(Debug, Clone)]
pub struct EventsPage {
    pub events: Vec<Event>,
    pub next: Option<EventPosition>,
}

/// Claims, reports and reads over a [`LedgerStore`]; executions and reconciliation through a
/// [`Provider`]. Cheap to clone.
#[derive(Clone)]
pub struct Ledger {
    pub(super) store: Arc<dyn LedgerStore>,
    provider: Option<Arc<dyn Provider>>,
    pub(super) telemetry: Telemetry,
    notifier: Option<Arc<dyn ApprovalNotifier>>,
    /// Tool policies as last read (`None`: not registered): every claim needs its tool's.
    policies: Arc<ReadCache<ToolName, Option<ToolPolicy>>>,
    /// The stream of operation changes that wakes `Prefer: wait` claims; without it they poll.
    changes: Option<Changes>,
}

/// How long a tool policy read from the database is reused unless told otherwise.
const POLICY_CACHE_MAX_AGE: Duration = Duration::from_secs(1);
/// At most this many tools' policies are kept in memory (agents may name any tool).
const POLICY_CACHE_CAPACITY: usize = 10_000;

/// How often a waiting claim re-reads its operation although no change of it was announced
/// (a lease that runs out announces nothing until the reaper turns it `unknown`).
const WAIT_SAFETY_RECHECK: Duration = Duration::from_secs(2);

/// Completes when a change of operation `id` is announced, or when some were missed (the
/// stream lagged or closed), so the caller re-reads.
async fn change_of(
    stream: &mut tokio::sync::broadcast::Receiver<super::OperationChange>,
    id: Uuid,
) {
    loop {
        match stream.recv().await {
            Ok(change) if change.id != id => continue,
            Ok(_) => return,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                std::future::pending::<()>().await
            }
        }
    }
}

/// The operation a claim is waiting on, if it waits at all.
fn unsettled(claim: &Claim) -> Option<Uuid> {
    match claim {
        Claim::InProgress { operation, .. } | Claim::AwaitingApproval { operation } => {
            Some(operation.id)
        }
        _ => None,
    }
}

/// The events a committed decision stored: none when it wrote nothing (a refused report).
pub(super) fn committed<T>(decision: &Decision<T>) -> &[Event] {
    if decision.writes.is_empty() {
        &[]
    } else {
        &decision.events
    }
}

/// A lease long enough for the executor's call (and idem's own retries of it, where they are
/// safe), with a second of margin.
fn lease_covering_the_call(policy: &ToolPolicy) -> u32 {
    let timeout_ms = policy.executor.as_ref().map_or(0, |e| e.timeout_ms);
    let retried = matches!(
        policy.guarantee(),
        Guarantee::Repeatable | Guarantee::ExactlyOnce
    );
    let busy_ms = if retried {
        3 * timeout_ms + 1200
    } else {
        timeout_ms
    };
    busy_ms.div_ceil(1000) + 1
}

/// How often a claim is retried when a concurrent claim of the same new key won the insert
/// (PostgreSQL); the second try always sees the winner's row.
const CLAIM_ATTEMPTS: usize = 3;

impl Ledger {
    /// The service over a store.
    pub fn new(store: Arc<dyn LedgerStore>) -> Self {
        Self {
            store,
            provider: None,
            telemetry: Telemetry::new(),
            notifier: None,
            policies: Arc::new(ReadCache::new(POLICY_CACHE_MAX_AGE, POLICY_CACHE_CAPACITY)),
            changes: None,
        }
    }

    /// The same ledger, waking waiting claims (`Prefer: wait`) when their operation changes
    /// instead of polling the database for it.
    pub fn with_changes(mut self, changes: Changes) -> Self {
        self.changes = Some(changes);
        self
    }

    /// The same ledger, reusing a tool policy read from the database for `max_age` (zero:
    /// read it for every claim). Changes made through this ledger apply at once either way.
    pub fn with_policy_cache(mut self, max_age: Duration) -> Self {
        self.policies = Arc::new(ReadCache::new(max_age, POLICY_CACHE_CAPACITY));
        self
    }

    /// The process's counters and histograms (`GET /metrics`).
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// The same ledger, calling tools and asking about keys through `provider`.
    pub fn with_provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    pub(super) fn provider(&self) -> Result<&Arc<dyn Provider>, LedgerError> {
        self.provider.as_ref().ok_or(LedgerError::NoProvider)
    }

    /// The same ledger, telling `notifier` of each request for approval it creates.
    pub fn with_approval_notifier(mut self, notifier: Arc<dyn ApprovalNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Claims a key for an agent of `namespace`: begins its operation, or answers for the one
    /// it has (a replay, a duplicate in flight, a refusal).
    #[tracing::instrument(skip_all, fields(namespace = %namespace, tool = %request.tool))]
    pub async fn claim(
        &self,
        namespace: &Namespace,
        actor: &str,
        request: SentClaim,
    ) -> Result<Claim, LedgerError> {
        let started = Instant::now();
        let answer = self.claim_once(namespace, actor, request).await;
        self.telemetry.claim_result(&answer, started.elapsed());
        answer
    }

    /// One claim, uncounted: `claim` and `claim_waiting` count the answer they give.
    async fn claim_once(
        &self,
        namespace: &Namespace,
        actor: &str,
        request: SentClaim,
    ) -> Result<Claim, LedgerError> {
        let claim = self.prepare(namespace, request).await?;
        let mut attempt = 0;
        let decision = loop {
            attempt += 1;
            let fresh = Fresh {
                operation_id: Uuid::now_v7(),
                lease_token: crate::identity::random_token(),
            };
            match self.store.claim(&claim, actor, fresh).await {
                Err(StoreError::Conflict) if attempt < CLAIM_ATTEMPTS => continue,
                other => break other?,
            }
        };
        if let (Some(notifier), Some(operation)) = (&self.notifier, newly_requested(&decision)) {
            notifier.approval_requested(operation);
        }
        self.telemetry.events_committed(committed(&decision));
        let quiet: Vec<Event> = decision
            .events
            .iter()
            .filter(|e| !e.kind.changes_state())
            .cloned()
            .collect();
        self.store.record_quiet_events(quiet);
        Ok(decision.outcome)
    }

    /// Like [`Ledger::claim`], but when the key's operation is running or waiting for
    /// approval, holds on until it settles or `wait` runs out, then answers for the state it
    /// ends in (`Prefer: wait=N`).
    pub async fn claim_waiting(
        &self,
        namespace: &Namespace,
        actor: &str,
        request: SentClaim,
        wait: Duration,
    ) -> Result<Claim, LedgerError> {
        let deadline = Instant::now() + wait;
        let mut started = Instant::now();
        let mut answer = self.claim_once(namespace, actor, request.clone()).await;
        while let Some(id) = answer.as_ref().ok().and_then(unsettled) {
            match self.wait_until_settled(id, deadline).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => return Err(error),
            }
            started = Instant::now();
            answer = self.claim_once(namespace, actor, request.clone()).await;
        }
        // Only the answer given counts, and its latency is the last claim's, not the wait.
        self.telemetry.claim_result(&answer, started.elapsed());
        answer
    }

    /// Waits until the operation leaves `pending` (or its lease runs out) and
    /// `awaiting_approval`; `false` when the deadline came first. With the change stream it
    /// re-reads the operation when a change of it is announced, and every
    /// [`WAIT_SAFETY_RECHECK`] in case an announcement was missed; without it, it polls.
    async fn wait_until_settled(&self, id: Uuid, deadline: Instant) -> Result<bool, LedgerError> {
        let mut changes = self.changes.as_ref().map(Changes::subscribe);
        let mut pause = Duration::from_millis(20);
        loop {
            if self.settled(id).await? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            let nap = deadline - now;
            match changes.as_mut() {
                Some(stream) => {
                    let _ =
                        tokio::time::timeout(nap.min(WAIT_SAFETY_RECHECK), change_of(stream, id))
                            .await;
                }
                None => {
                    tokio::time::sleep(pause.min(nap)).await;
                    pause = (pause * 2).min(Duration::from_millis(250));
                }
            }
        }
    }

    /// Whether the operation no longer holds a waiting claim (gone counts as settled).
    async fn settled(&self, id: Uuid) -> Result<bool, LedgerError> {
        let Some(operation) = self.store.operation(id).await? else {
            return Ok(true);
        };
        let running = operation.status == OperationStatus::Pending
            && operation.lease_is_live(chrono::Utc::now());
        Ok(!running && operation.status != OperationStatus::AwaitingApproval)
    }

    /// Checks and normalises a claim (see [`check_request`] and [`prepare_claim`]) under the
    /// tool's registered policy, or the default one.
    async fn prepare(
        &self,
        namespace: &Namespace,
        request: SentClaim,
    ) -> Result<ClaimRequest, LedgerError> {
        let tool = check_request(&request)?;
        let mut policy = self
            .claim_policy(&tool)
            .await?
            .unwrap_or_else(ToolPolicy::default_for_unregistered);
        if request.runner == Runner::Idem {
            // idem's own call must end inside its lease, or the lease could run out while
            // the call may still take effect.
            policy.lease_seconds = policy.lease_seconds.max(lease_covering_the_call(&policy));
        }
        prepare_claim(namespace, tool, request, policy)
    }

    /// The registered policy a claim runs under, from the cache when it was read recently.
    async fn claim_policy(&self, tool: &ToolName) -> Result<Option<ToolPolicy>, StoreError> {
        if let Some(policy) = self.policies.get(tool) {
            return Ok(policy);
        }
        let ticket = self.policies.ticket();
        let policy = self.store.tool(tool).await?;
        self.policies.fill(ticket, tool.clone(), policy.clone());
        Ok(policy)
    }

    /// Records a lease holder's report (`complete` or `unknown`).
    #[tracing::instrument(skip_all, fields(namespace = %namespace, operation = %id))]
    pub async fn report(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: Report,
        actor: &str,
    ) -> Result<Operation, LedgerError> {
        let decision = self
            .store
            .report(namespace, id, token, &report, actor)
            .await?
            .ok_or(LedgerError::NotFound)?;
        self.telemetry.events_committed(committed(&decision));
        Ok(decision.outcome?)
    }

    /// An operation, if it belongs to `namespace` (or to anyone, for people: `None`).
    pub async fn operation(
        &self,
        namespace: Option<&Namespace>,
        id: Uuid,
    ) -> Result<Operation, LedgerError> {
        let operation = self
            .store
            .operation(id)
            .await?
            .ok_or(LedgerError::NotFound)?;
        match namespace {
            Some(namespace) if &operation.namespace != namespace => Err(LedgerError::NotFound),
            _ => Ok(operation),
        }
    }

    /// Records a person's verdict on an operation waiting for approval.
    #[tracing::instrument(skip_all, fields(operation = %id, approver = %username))]
    pub async fn decide(
        &self,
        id: Uuid,
        verdict: Verdict,
        username: &str,
    ) -> Result<Operation, LedgerError> {
        let decision = self
            .store
            .decide(id, &verdict, username)
            .await?
            .ok_or(LedgerError::NotFound)?;
        let operation = decision.outcome?;
        if operation.status == OperationStatus::Approved && operation.runner == Runner::Idem {
            self.run_approved_in_background(operation.clone());
        }
        Ok(operation)
    }

    /// One round of the lease reaper: up to `limit` expired leases become `unknown`.
    pub async fn expire_leases(&self, limit: u32) -> Result<usize, LedgerError> {
        let expired = self.store.expire_leases(limit).await?;
        self.telemetry.marked_unknown(expired as u64);
        Ok(expired)
    }

    /// Registers or replaces a tool after checking its policy.
    #[tracing::instrument(skip_all, fields(tool = %name))]
    pub async fn put_tool(
        &self,
        name: &str,
        policy: ToolPolicy,
    ) -> Result<RegisteredTool, LedgerError> {
        let name =
            ToolName::try_from(name).map_err(|e| LedgerError::invalid(e.code(), e.to_string()))?;
        policy
            .validate()
            .map_err(|e| LedgerError::invalid(e.code(), e.to_string()))?;
        let registered = self.store.put_tool(&name, &policy).await;
        self.policies.invalidate(&name);
        Ok(registered?)
    }

    /// Every registered tool.
    pub async fn tools(&self) -> Result<Vec<RegisteredTool>, LedgerError> {
        Ok(self.store.tools().await?)
    }

    /// A tool's policy: the registered one, or the default an unregistered tool gets
    /// (`false` in the second place).
    pub async fn tool(&self, name: &str) -> Result<(ToolName, ToolPolicy, bool), LedgerError> {
        let name = ToolName::try_from(name).map_err(|_| LedgerError::NotFound)?;
        match self.store.tool(&name).await? {
            Some(policy) => Ok((name, policy, true)),
            None => Ok((name, ToolPolicy::default_for_unregistered(), false)),
        }
    }

    /// A page of operations, newest first, and whether more follow.
    pub async fn list(
        &self,
        filter: &OperationFilter,
        limit: u32,
    ) -> Result<(Vec<Operation>, bool), LedgerError> {
        let mut operations = self.store.list(filter, limit + 1).await?;
        let more = operations.len() > limit as usize;
        operations.truncate(limit as usize);
        Ok((operations, more))
    }

    /// How many operations wait for a person's verdict, in every namespace.
    pub async fn count_awaiting_approval(&self) -> Result<u64, LedgerError> {
        Ok(self.store.count_awaiting_approval().await?)
    }

    /// The audit trail of an operation the caller may see.
    pub async fn events(
        &self,
        namespace: Option<&Namespace>,
        id: Uuid,
    ) -> Result<Vec<Event>, LedgerError> {
        self.operation(namespace, id).await?;
        Ok(self.store.events(id).await?)
    }

    /// One page of the events of an operation visible in `namespace` (every namespace for
    /// `None`), and where the next page starts if there is one.
    pub async fn events_page(
        &self,
        namespace: Option<&Namespace>,
        id: Uuid,
        page: EventPage,
    ) -> Result<EventsPage, LedgerError> {
        self.operation(namespace, id).await?;
        let asked = EventPage {
            limit: page.limit.saturating_add(1),
            ..page
        };
        let mut events = self.store.events_page(id, &asked).await?;
        let more = events.len() > page.limit as usize;
        events.truncate(page.limit as usize);
        let next = more
            .then(|| events.last().map(|(position, _)| *position))
            .flatten();
        Ok(EventsPage {
            events: events.into_iter().map(|(_, event)| event).collect(),
            next,
        })
    }
}
