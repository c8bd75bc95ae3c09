//! Calls of the bench handler through Restate's ingress, each with an `idempotency-key`
//! header: a fresh key per call (Restate journals and runs an invocation, then stores its
//! result) or a key whose invocation has completed (Restate answers from the stored result).

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use serde_json::json;
use uuid::Uuid;

use super::table::Step;
use crate::runner::{StepError, Workload};

/// How many completed keys the replays cycle through, as idem's replay scenario does.
const REPLAY_KEYS: usize = 64;
/// The header Restate answers a repeated key with, next to the stored result.
const REPLAY_HEADER: &str = "idempotency-expires";

/// The ingress URL of the bench handler (`Bench/charge` in `handler.mjs`).
pub fn url(ingress: &str) -> String {
    format!("{ingress}/Bench/charge")
}

/// One call of the handler with an idempotency key; the body is the same for every key, as
/// the arguments of idem's bench are.
pub fn call(client: &reqwest::Client, url: &str, key: &str) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("idempotency-key", key)
        .json(&json!({ "amount_cents": 500 }))
}

/// Whether an answer came from Restate's stored result of an earlier call with the key.
pub fn is_replay(headers: &HeaderMap) -> bool {
    headers.contains_key(REPLAY_HEADER)
}

/// The load on Restate for one step kind.
pub struct RestateCalls {
    step: Step,
    client: reqwest::Client,
    url: String,
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
            client: reqwest::Client::new(),
            url: url(ingress),
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
        let response = call(&self.client, &self.url, key).send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        if status == 200 {
            Ok(headers)
        } else {
            let body = String::from_utf8_lossy(&body).chars().take(300).collect();
            Err(StepError::Answer { status, body })
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
    use reqwest::header::HeaderValue;

    #[test]
    fn a_call_posts_the_same_json_with_the_key_in_the_idempotency_header() {
        let client = reqwest::Client::new();
        let request = call(&client, &url("http://127.0.0.1:18080"), "run-7-3")
            .build()
            .expect("a valid request");
        assert_eq!(request.method(), reqwest::Method::POST);
        assert_eq!(
            request.url().as_str(),
            "http://127.0.0.1:18080/Bench/charge"
        );
        assert_eq!(request.headers()["idempotency-key"], "run-7-3");
        assert_eq!(request.headers()["content-type"], "application/json");
        let body = request.body().and_then(|body| body.as_bytes());
        assert_eq!(body, Some(&br#"{"amount_cents":500}"#[..]));
    }

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
