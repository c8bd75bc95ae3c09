//! Injected faults: what `POST /_faults` queues and the next matching call consumes.

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest delay a fault may ask for (ten minutes): longer would only hang tests.
const MAX_DELAY_MS: u64 = 600_000;

/// The body of `POST /_faults`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRequest {
    /// The kind, e.g. `delay_after_commit`.
    pub fault: String,
    /// Only calls carrying this `Idempotency-Key` (lookups: this `key`) match.
    #[serde(default)]
    pub key: Option<String>,
    /// Only calls of this action (`POST /actions/{action}`, its lookups) match: for a caller
    /// that cannot know the key idem will send (each operation's own provider key).
    #[serde(default)]
    pub action: Option<String>,
    /// How many matching calls it hits (default 1).
    #[serde(default)]
    pub times: Option<u32>,
    /// For the delay kinds: how long to wait.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// For `fail_before_commit` (default 503) and `lookup_error` (default 503).
    #[serde(default)]
    pub status: Option<u16>,
}

/// What a fault does to the call it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Commit, then wait before answering: the caller times out after the effect happened.
    DelayAfterCommit(Duration),
    /// Wait, then commit and answer: a slow provider.
    DelayBeforeCommit(Duration),
    /// Answer this error status and commit nothing.
    FailBeforeCommit(StatusCode),
    /// Commit, then close the connection without any HTTP response.
    DropAfterCommit,
    /// Close the connection without any HTTP response and commit nothing.
    DropBeforeCommit,
    /// The lookup answers this error status.
    LookupError(StatusCode),
    /// The lookup waits before answering.
    LookupDelay(Duration),
}

impl FaultKind {
    /// Whether it hits lookups (`GET …/lookup`) rather than actions (`POST /actions/…`).
    pub fn is_lookup(self) -> bool {
        matches!(self, Self::LookupError(_) | Self::LookupDelay(_))
    }

    /// The name `POST /_faults` uses for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::DelayAfterCommit(_) => "delay_after_commit",
            Self::DelayBeforeCommit(_) => "delay_before_commit",
            Self::FailBeforeCommit(_) => "fail_before_commit",
            Self::DropAfterCommit => "drop_after_commit",
            Self::DropBeforeCommit => "drop_before_commit",
            Self::LookupError(_) => "lookup_error",
            Self::LookupDelay(_) => "lookup_delay",
        }
    }
}

/// A queued fault and how many more calls it hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub key: Option<String>,
    pub action: Option<String>,
    pub times: u32,
}

/// A call to the sandbox, as faults see it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// A lookup (`GET …/lookup`) rather than an action.
    pub lookup: bool,
    pub action: &'a str,
    pub key: Option<&'a str>,
}

impl Fault {
    /// Whether the call is one the fault waits for.
    pub fn matches(&self, call: Call<'_>) -> bool {
        self.kind.is_lookup() == call.lookup
            && self.key.as_deref().is_none_or(|k| Some(k) == call.key)
            && self.action.as_deref().is_none_or(|a| a == call.action)
    }
}

/// How the fault is shown back (`POST /_faults`, `GET /_faults`).
#[derive(Debug, Serialize)]
pub struct FaultView {
    fault: &'static str,
    key: Option<String>,
    action: Option<String>,
    times: u32,
    delay_ms: Option<u64>,
    status: Option<u16>,
}

impl From<&Fault> for FaultView {
    fn from(fault: &Fault) -> Self {
        let (delay, status) = match fault.kind {
            FaultKind::DelayAfterCommit(d)
            | FaultKind::DelayBeforeCommit(d)
            | FaultKind::LookupDelay(d) => (Some(d), None),
            FaultKind::FailBeforeCommit(s) | FaultKind::LookupError(s) => (None, Some(s)),
            FaultKind::DropAfterCommit | FaultKind::DropBeforeCommit => (None, None),
        };
        Self {
            fault: fault.kind.name(),
            key: fault.key.clone(),
            action: fault.action.clone(),
            times: fault.times,
            delay_ms: delay.map(|d| d.as_millis() as u64),
            status: status.map(|s| s.as_u16()),
        }
    }
}

impl TryFrom<FaultRequest> for Fault {
    /// A message for whoever queued it.
    type Error = String;

    fn try_from(request: FaultRequest) -> Result<Self, Self::Error> {
        let delay = || match request.delay_ms {
            Some(ms) if ms <= MAX_DELAY_MS => Ok(Duration::from_millis(ms)),
            Some(_) => Err(format!("delay_ms must be at most {MAX_DELAY_MS}")),
            None => Err(format!("{} needs delay_ms", request.fault)),
        };
        let status = || match request.status.unwrap_or(503) {
            code @ 400..=599 => Ok(StatusCode::from_u16(code).expect("400..=599 is a status")),
            _ => Err("status must be 400 to 599".to_owned()),
        };
        let kind = match request.fault.as_str() {
            "delay_after_commit" => FaultKind::DelayAfterCommit(delay()?),
            "delay_before_commit" => FaultKind::DelayBeforeCommit(delay()?),
            "fail_before_commit" => FaultKind::FailBeforeCommit(status()?),
            "drop_after_commit" => FaultKind::DropAfterCommit,
            "drop_before_commit" => FaultKind::DropBeforeCommit,
            "lookup_error" => FaultKind::LookupError(status()?),
            "lookup_delay" => FaultKind::LookupDelay(delay()?),
            other => return Err(format!("unknown fault {other:?}")),
        };
        let times = request.times.unwrap_or(1);
        if times == 0 {
            return Err("times must be at least 1".to_owned());
        }
        Ok(Self {
            kind,
            key: request.key,
            action: request.action,
            times,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: serde_json::Value) -> Result<Fault, String> {
        Fault::try_from(serde_json::from_value::<FaultRequest>(body).unwrap())
    }

    #[test]
    fn requests_become_faults_with_their_defaults() {
        let ms = Duration::from_millis;
        let cases = [
            (
                json!({"fault": "delay_after_commit", "delay_ms": 50}),
                FaultKind::DelayAfterCommit(ms(50)),
            ),
            (
                json!({"fault": "delay_before_commit", "delay_ms": 0}),
                FaultKind::DelayBeforeCommit(ms(0)),
            ),
            (
                json!({"fault": "fail_before_commit"}),
                FaultKind::FailBeforeCommit(StatusCode::SERVICE_UNAVAILABLE),
            ),
            (
                json!({"fault": "fail_before_commit", "status": 429}),
                FaultKind::FailBeforeCommit(StatusCode::TOO_MANY_REQUESTS),
            ),
            (
                json!({"fault": "drop_after_commit"}),
                FaultKind::DropAfterCommit,
            ),
            (
                json!({"fault": "drop_before_commit"}),
                FaultKind::DropBeforeCommit,
            ),
            (
                json!({"fault": "lookup_error"}),
                FaultKind::LookupError(StatusCode::SERVICE_UNAVAILABLE),
            ),
            (
                json!({"fault": "lookup_delay", "delay_ms": 5}),
                FaultKind::LookupDelay(ms(5)),
            ),
        ];
        for (body, kind) in cases {
            let fault = parse(body.clone()).unwrap();
            assert_eq!(
                (fault.kind, fault.times, fault.key),
                (kind, 1, None),
                "{body}"
            );
        }
    }

    #[test]
    fn nonsense_is_refused_with_a_reason() {
        let cases = [
            (json!({"fault": "explode"}), "unknown fault"),
            (json!({"fault": "delay_after_commit"}), "needs delay_ms"),
            (
                json!({"fault": "delay_before_commit", "delay_ms": 600_001}),
                "at most",
            ),
            (
                json!({"fault": "fail_before_commit", "status": 200}),
                "400 to 599",
            ),
            (
                json!({"fault": "drop_after_commit", "times": 0}),
                "at least 1",
            ),
        ];
        for (body, reason) in cases {
            let error = parse(body.clone()).unwrap_err();
            assert!(error.contains(reason), "{body}: {error}");
        }
    }

    fn call<'a>(lookup: bool, action: &'a str, key: Option<&'a str>) -> Call<'a> {
        Call {
            lookup,
            action,
            key,
        }
    }

    #[test]
    fn a_fault_with_a_key_matches_only_that_key_and_its_kind_of_call() {
        let fault = parse(json!({"fault": "drop_after_commit", "key": "k1"})).unwrap();
        assert!(fault.matches(call(false, "refund", Some("k1"))));
        assert!(!fault.matches(call(false, "refund", Some("k2"))));
        assert!(!fault.matches(call(false, "refund", None)));
        assert!(!fault.matches(call(true, "refund", Some("k1"))));
        let any = parse(json!({"fault": "lookup_error"})).unwrap();
        assert!(any.matches(call(true, "a", Some("k9"))) && any.matches(call(true, "b", None)));
        assert!(!any.matches(call(false, "a", None)));
    }

    #[test]
    fn a_fault_for_an_action_matches_only_that_actions_calls() {
        let fault = parse(json!({"fault": "drop_after_commit", "action": "refund"})).unwrap();
        assert!(fault.matches(call(false, "refund", Some("idem_1"))));
        assert!(fault.matches(call(false, "refund", None)));
        assert!(!fault.matches(call(false, "email", Some("idem_1"))));
    }
}
