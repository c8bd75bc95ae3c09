//! Alerts that reach people: every round, the watcher looks at what waits in the ledger and
//! POSTs to `IDEM_ALERT_WEBHOOK_URL` when a condition starts (`"state": "firing"`) and once
//! when it clears (`"resolved"`): once per incident, never a storm, and never in the way of
//! a request (it only reads). The conditions:
//! - `stuck_unknowns`: more operations `unknown` for longer than the stuck threshold than
//!   `IDEM_ALERT_STUCK_UNKNOWNS` (default 0: any);
//! - `approval_waiting`: a request for approval older than `IDEM_ALERT_APPROVAL_WAIT_MINUTES`;
//! - `reconciliation_failing` (one incident per tool): an `unknown` operation of the tool
//!   whose reconciliation was tried `IDEM_ALERT_RECONCILE_ATTEMPTS` times or more.
//!
//! Incidents live in the process: after a restart one still open fires again, and several
//! idem processes each alert (set the URL on one of them).

use app::domain::{OperationStatus, ToolName};
use app::ledger::{Ledger, Operation, OperationFilter};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinSet;

use super::webhook::Webhook;
use super::{stopped, StopSignal};

/// How many operations of a queue one round reads at most: plenty to tell that a condition
/// holds; the count an alert gives is "at least" beyond it.
const READ_AT_MOST: u32 = 1000;

/// When each condition holds.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// An operation `unknown` for longer than this is stuck.
    pub stuck_after: TimeDelta,
    /// Stuck operations tolerated: more fire `stuck_unknowns`.
    pub stuck_unknowns: u64,
    /// A request for approval older than this fires `approval_waiting`.
    pub approval_wait: TimeDelta,
    /// Reconciliation attempts of one unknown operation that fire `reconciliation_failing`.
    pub reconcile_attempts: u32,
}

/// One condition that holds now: which, for which tool, how much.
#[derive(Debug, Clone, PartialEq)]
struct Finding {
    value: u64,
    threshold: u64,
}

/// An incident: a condition seen holding since `since`.
#[derive(Debug, Clone)]
struct Incident {
    since: DateTime<Utc>,
    finding: Finding,
}

/// The alert watcher of one process.
#[derive(Clone)]
pub struct AlertWatch {
    ledger: Ledger,
    webhook: Webhook,
    thresholds: Thresholds,
    interval: Duration,
    /// `IDEM_PUBLIC_URL` without its trailing `/`, for links in the alerts.
    public_url: Option<String>,
    open: std::sync::Arc<tokio::sync::Mutex<BTreeMap<String, Incident>>>,
}

impl AlertWatch {
    pub fn new(
        ledger: Ledger,
        webhook: Webhook,
        thresholds: Thresholds,
        interval: Duration,
        public_url: Option<&str>,
    ) -> Self {
        Self {
            ledger,
            webhook,
            thresholds,
            interval,
            public_url: public_url.map(|url| url.trim_end_matches('/').to_owned()),
            open: Default::default(),
        }
    }

    /// One look: fires what started, resolves what cleared; returns the alerts it sent (or
    /// queued for retry), each as its body.
    pub async fn run_once(&self, retries: &mut JoinSet<()>) -> Vec<Value> {
        let now = Utc::now();
        let findings = match self.findings(now).await {
            Ok(findings) => findings,
            Err(error) => {
                tracing::warn!(%error, "the alert watcher could not read the ledger; next round");
                return Vec::new();
            }
        };
        let mut open = self.open.lock().await;
        let mut sent = Vec::new();
        for (name, finding) in &findings {
            if !open.contains_key(name) {
                let incident = Incident {
                    since: now,
                    finding: finding.clone(),
                };
                sent.push(self.body(name, "firing", &incident, now));
                open.insert(name.clone(), incident);
            }
        }
        let cleared: Vec<String> = open
            .keys()
            .filter(|name| !findings.contains_key(*name))
            .cloned()
            .collect();
        for name in cleared {
            let incident = open.remove(&name).expect("listed above");
            sent.push(self.body(&name, "resolved", &incident, now));
        }
        drop(open);
        for body in &sent {
            let key = format!(
                "alert:{}:{}:{}",
                body["alert_id"].as_str().unwrap_or_default(),
                body["state"].as_str().unwrap_or_default(),
                body["since"].as_str().unwrap_or_default()
            );
            if !self.webhook.deliver(&key, body, 1).await {
                retries.spawn(self.webhook.clone().retry(key, body.clone()));
            }
        }
        sent
    }

    /// Looks every `interval` until the stop signal fires.
    pub async fn run(self, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        let mut retries = JoinSet::new();
        loop {
            self.run_once(&mut retries).await;
            while retries.try_join_next().is_some() {}
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }

    /// Every condition that holds now, by incident name.
    async fn findings(&self, now: DateTime<Utc>) -> Result<BTreeMap<String, Finding>, String> {
        let mut found = BTreeMap::new();
        let unknown = self.oldest(OperationStatus::Unknown).await?;
        let stuck_before = now - self.thresholds.stuck_after;
        let stuck = unknown
            .iter()
            .filter(|op| op.unknown_since.unwrap_or(op.updated_at) < stuck_before)
            .count() as u64;
        if stuck > self.thresholds.stuck_unknowns {
            let threshold = self.thresholds.stuck_unknowns;
            found.insert(
                "stuck_unknowns".into(),
                Finding {
                    value: stuck,
                    threshold,
                },
            );
        }
        let mut failing: BTreeMap<&ToolName, u64> = BTreeMap::new();
        for op in &unknown {
            if op.reconcile_attempts >= self.thresholds.reconcile_attempts {
                *failing.entry(&op.tool).or_default() += 1;
            }
        }
        for (tool, value) in failing {
            let threshold = u64::from(self.thresholds.reconcile_attempts);
            found.insert(
                format!("reconciliation_failing:{tool}"),
                Finding { value, threshold },
            );
        }
        let waiting = self.oldest(OperationStatus::AwaitingApproval).await?;
        let waited_since = now - self.thresholds.approval_wait;
        let late = waiting
            .iter()
            .filter(|op| op.created_at < waited_since)
            .count() as u64;
        if late > 0 {
            let threshold = self.thresholds.approval_wait.num_minutes().max(0) as u64;
            found.insert(
                "approval_waiting".into(),
                Finding {
                    value: late,
                    threshold,
                },
            );
        }
        Ok(found)
    }

    /// The operations of a status, oldest first, up to [`READ_AT_MOST`].
    async fn oldest(&self, status: OperationStatus) -> Result<Vec<Operation>, String> {
        let filter = OperationFilter {
            status: Some(status),
            oldest_first: true,
            ..OperationFilter::default()
        };
        let (operations, _) = self
            .ledger
            .list(&filter, READ_AT_MOST)
            .await
            .map_err(|error| error.to_string())?;
        Ok(operations)
    }

    /// The JSON of an alert.
    fn body(&self, name: &str, state: &str, incident: &Incident, now: DateTime<Utc>) -> Value {
        let (alert, tool) = match name.split_once(':') {
            Some((alert, tool)) => (alert, Some(tool)),
            None => (name, None),
        };
        let page = match alert {
            "approval_waiting" => "/approvals",
            _ => "/unknowns",
        };
        let url = self.public_url.as_ref().map(|base| format!("{base}{page}"));
        json!({
            "event": "alert",
            "state": state,
            "alert": alert,
            "alert_id": name,
            "tool": tool,
            "value": incident.finding.value,
            "threshold": incident.finding.threshold,
            "since": incident.since,
            "at": now,
            "url": url,
        })
    }
}
