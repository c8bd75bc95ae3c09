//! Calls of the bench handler through Restate's ingress, each with an `idempotency-key`
//! header: a fresh key per call (Restate journals and runs an invocation, then stores its
//! result) or a key whose invocation has completed (Restate answers from the stored result).

use async_trait::async_trait;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use uuid::Uuid;

use super::table::Step;
use crate::load_client::{Answer, LoadClient, LoadError};
use crate::runner::{StepError, Workload};

/// How many completed keys the replays cycle through, as idem's replay scenario does.
const REPLAY_KEYS: usize = 64;
/// The header Restate answers a repeated key with, next to the stored result.
const REPLAY_HEADER: &str = "idempotency-expires";
/// The ingress path of the bench handler (`Bench/charge` in `handler.mjs`).
const PATH: &str = "/Bench/charge";
/// Every call's body, as the arguments of idem's bench are the same for every key.
const BODY: &[u8] = br#"{"amount_cents":500}"#;

/// A client of the ingress at `ingress` (`http://host:port`).
pub fn client(ingress: &str) -> Result<LoadClient, StepError> {
    Ok(LoadClient::new(ingress, HeaderMap::new())?)
}

/// One call of the handler with an idempotency key, answered in full.
pub async fn call(client: &LoadClient, key: &str) -> Result<Answer, StepError> {
    let key = HeaderValue::from_str(key).map_err(LoadError::from)?;
    let extra = [(HeaderName::from_static("idempotency-key"), key)];
    Ok(client.post_json(PATH, BODY.to_vec(), &extra).await?)
}

/// Whether an answer came from Restate's stored result of an earlier call with the key.
pub fn is_replay(headers: &HeaderMap) -> bool {
    headers.contains_key(REPLAY_HEADER)
}

/// The load on Restate for one step kind.
pub struct RestateCalls {
    step: Step,
    client: LoadClient,
    /// Unique per run, so new keys never meet earlier keys.
    prefix: String,
    /// Keys whose invocations completed before the run, for replays.
    completed: Vec<String>,
}

impl RestateCalls {
    /// Prepares the load; for replays, first calls each of the keys once.
    pub async fn prepare(ingress: &str, step: Step) -> Result<Self, StepError> {
        let prefix = Uuid::new_v4().simple().to_string();
        let mut calls = Self {
            step,
            client: client(ingress)?,
            completed: Vec::new(),
            prefix,
        };
        if step == Step::Replay {
            for index in 0..REPLAY_KEYS {
                let key = format!("{}-done-{index}", calls.prefix);
                calls.send(&key).await?;
                calls.completed.push(key);
            }
        }
        Ok(calls)
    }

    /// Sends one call; any answer but 200 is an error. Returns the answer's headers.
    async fn send(&self, key: &str) -> Result<HeaderMap, StepError> {
        let answer = call(&self.client, key).await?;
        if answer.status == 200 {
            Ok(answer.headers)
        } else {
            let body = String::from_utf8_lossy(&answer.body)
                .chars()
                .take(300)
                .collect();
            Err(StepError::Answer {
                status: answer.status,
                body,
            })
        }
    }

    /// wrk's load of the same repeated keys, on the ingress at `base`.
    pub fn wrk_target(&self, base: &str) -> crate::wrk::Target {
        crate::wrk::Target {
            base: base.to_owned(),
            load: crate::wrk::Load::RestateReplay,
            prefix: self.prefix.clone(),
            authorization: None,
            completed_keys: self.completed.len(),
        }
    }

    async fn replay(&self, task: usize, seq: u64) -> Result<(), StepError> {
        let key = crate::replay_key(&self.completed, task, seq)?;
        let headers = self.send(key).await?;
        if is_replay(&headers) {
            Ok(())
        } else {
            Err(StepError::Outcome(format!(
                "a repeated key was answered without `{REPLAY_HEADER}`: not from the stored result"
            )))
        }
    }
}

#[async_trait]
impl Workload for RestateCalls {
    async fn step(&self, task: usize, seq: u64) -> Result<(), StepError> {
        match self.step {
            Step::New => {
                let key = format!("{}-{task}-{seq}", self.prefix);
                self.send(&key).await.map(drop)
            }
            Step::Replay => self.replay(task, seq).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_with_the_expiry_header_are_replays() {
        let mut headers = HeaderMap::new();
        headers.insert("x-restate-id", HeaderValue::from_static("inv_1"));
        assert!(!is_replay(&headers));
        headers.insert(
            "idempotency-expires",
            HeaderValue::from_static("2026-12-02T20:08:42.348+00:00"),
        );
        assert!(is_replay(&headers));
    }
}
