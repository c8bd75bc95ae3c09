//! The Ledger service: parses what an agent sends into a claim, drives the rules over the
//! store, and keeps namespaces apart.

use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

use super::claim::{Claim, Fresh};
use super::complete::{Report, ReportRefused};
use super::model::{ClaimRequest, Event, Operation};
use super::notify::{newly_requested, ApprovalNotifier};
use super::prepare::{check_request, prepare_claim};
use super::store::{LedgerStore, OperationFilter, RegisteredTool};
use super::verdict::{Verdict, VerdictRefused};
use crate::domain::{Namespace, OperationStatus, ToolName, ToolPolicy};
use crate::store_error::StoreError;

/// A claim as the agent sent it, before any checks.
#[derive(Debug, Clone, Default)]
pub struct BeginRequest {
    pub tool: String,
    pub args: Value,
    /// The `Idempotency-Key` header.
    pub header_key: Option<String>,
    pub body_key: Option<String>,
    pub business_key: Option<String>,
    pub run_id: Option<String>,
    pub step: Option<u64>,
}

/// Why the ledger refused a request.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// 400: the request is invalid; nothing was stored.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// 404: no such operation in the caller's namespace.
    #[error("no such operation")]
    NotFound,
    /// 409: a report that does not fit the operation's state.
    #[error(transparent)]
    Refused(#[from] ReportRefused),
    /// 409: a verdict on an operation that does not wait for one.
    #[error(transparent)]
    VerdictRefused(#[from] VerdictRefused),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl LedgerError {
    pub(super) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        LedgerError::Invalid {
            code,
            message: message.into(),
        }
    }
}

/// Claims, reports and reads over a [`LedgerStore`]. Cheap to clone.
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn LedgerStore>,
    notifier: Option<Arc<dyn ApprovalNotifier>>,
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

/// How often a claim is retried when a concurrent claim of the same new key won the insert
/// (PostgreSQL); the second try always sees the winner's row.
const CLAIM_ATTEMPTS: usize = 3;

impl Ledger {
    /// The service over a store.
    pub fn new(store: Arc<dyn LedgerStore>) -> Self {
        Self {
            store,
            notifier: None,
        }
    }

    /// The same ledger, telling `notifier` of each request for approval it creates.
    pub fn with_approval_notifier(mut self, notifier: Arc<dyn ApprovalNotifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Begins (or replays) an operation for an agent of `namespace`.
    #[tracing::instrument(skip_all, fields(namespace = %namespace, tool = %request.tool))]
    pub async fn begin(
        &self,
        namespace: &Namespace,
        actor: &str,
        request: BeginRequest,
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
        let quiet: Vec<Event> = decision
            .events
            .iter()
            .filter(|e| !e.kind.changes_state())
            .cloned()
            .collect();
        self.store.append_events(&quiet).await?;
        Ok(decision.outcome)
    }

    /// Like [`Ledger::begin`], but when the key's operation is running or waiting for
    /// approval, holds on until it settles or `wait` runs out, then answers for the state it
    /// ends in (`Prefer: wait=N`).
    pub async fn begin_waiting(
        &self,
        namespace: &Namespace,
        actor: &str,
        request: BeginRequest,
        wait: Duration,
    ) -> Result<Claim, LedgerError> {
        let deadline = Instant::now() + wait;
        let mut claim = self.begin(namespace, actor, request.clone()).await?;
        while let Some(id) = unsettled(&claim) {
            if !self.wait_until_settled(id, deadline).await? {
                break;
            }
            claim = self.begin(namespace, actor, request.clone()).await?;
        }
        Ok(claim)
    }

    /// Polls the operation until it leaves `pending` (or its lease runs out) and
    /// `awaiting_approval`; `false` when the deadline came first.
    async fn wait_until_settled(&self, id: Uuid, deadline: Instant) -> Result<bool, LedgerError> {
        let mut pause = Duration::from_millis(20);
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(Duration::from_millis(250));
            let Some(operation) = self.store.operation(id).await? else {
                return Ok(true);
            };
            let running = operation.status == OperationStatus::Pending
                && operation.lease_is_live(chrono::Utc::now());
            if !running && operation.status != OperationStatus::AwaitingApproval {
                return Ok(true);
            }
        }
    }

    /// Checks and normalises a claim (see [`check_request`] and [`prepare_claim`]) under the
    /// tool's registered policy, or the default one.
    async fn prepare(
        &self,
        namespace: &Namespace,
        request: BeginRequest,
    ) -> Result<ClaimRequest, LedgerError> {
        let tool = check_request(&request)?;
        let policy = self
            .store
            .tool(&tool)
            .await?
            .unwrap_or_else(ToolPolicy::default_for_unregistered);
        prepare_claim(namespace, tool, request, policy)
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
        Ok(decision.outcome?)
    }

    /// One round of the lease reaper: up to `limit` expired leases become `unknown`.
    pub async fn expire_leases(&self, limit: u32) -> Result<usize, LedgerError> {
        Ok(self.store.expire_leases(limit).await?)
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
        Ok(self.store.put_tool(&name, &policy).await?)
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

    /// The audit trail of an operation the caller may see.
    pub async fn events(
        &self,
        namespace: Option<&Namespace>,
        id: Uuid,
    ) -> Result<Vec<Event>, LedgerError> {
        self.operation(namespace, id).await?;
        Ok(self.store.events(id).await?)
    }
}
