//! `TestSandbox`: the sandbox provider started in-process on port 0, with one helper per
//! endpoint, for the sandbox's own tests and for tests of idem calling it.

use app::domain::ExecutorConfig;
use idem::sandbox::Sandbox;
use reqwest::Response;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::oneshot;

/// A running sandbox provider, stopped when dropped.
pub struct TestSandbox {
    pub address: String,
    http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Drop for TestSandbox {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

impl TestSandbox {
    /// Starts a sandbox on a free port of loopback.
    pub async fn spawn() -> Self {
        let sandbox = Sandbox::bind("127.0.0.1:0")
            .await
            .expect("bind the sandbox");
        let address = format!("http://{}", sandbox.local_addr());
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(sandbox.run_until(async move {
            let _ = stopped.await;
        }));
        Self {
            address,
            http: reqwest::Client::new(),
            shutdown: Some(shutdown),
        }
    }

    /// The executor of the action `name`, with its lookup as `reconcile_url`.
    pub fn executor(&self, name: &str, timeout_ms: u32) -> ExecutorConfig {
        ExecutorConfig {
            url: format!("{}/actions/{name}", self.address),
            reconcile_url: Some(format!("{}/actions/{name}/lookup", self.address)),
            timeout_ms,
            provider_dedupes: true,
        }
    }

    /// `POST /actions/{name}` with the key, if any, as `Idempotency-Key`.
    pub async fn act(&self, name: &str, key: Option<&str>, args: &Value) -> Response {
        self.try_act(name, key, args, None)
            .await
            .expect("the sandbox answers")
    }

    /// `POST /actions/{name}`, giving up after `timeout` if given; errors are returned.
    pub async fn try_act(
        &self,
        name: &str,
        key: Option<&str>,
        args: &Value,
        timeout: Option<Duration>,
    ) -> reqwest::Result<Response> {
        let mut request = self
            .http
            .post(format!("{}/actions/{name}", self.address))
            .json(args);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        request.send().await
    }

    /// `GET /actions/{name}/lookup?key=…`.
    pub async fn lookup(&self, name: &str, key: &str) -> Response {
        self.http
            .get(format!("{}/actions/{name}/lookup", self.address))
            .query(&[("key", key)])
            .send()
            .await
            .unwrap()
    }

    /// `GET /_effects`.
    pub async fn effects(&self) -> Value {
        self.get_json("/_effects").await
    }

    /// The number of effects committed so far.
    pub async fn total(&self) -> u64 {
        self.effects().await["total"].as_u64().unwrap()
    }

    /// Waits (up to 10 s) until `total` effects have been committed; false if never.
    pub async fn wait_for_total(&self, total: u64) -> bool {
        self.wait_until(|s| async move { s.total().await == total })
            .await
    }

    /// Waits (up to 10 s) until every queued fault has been consumed; false if never.
    pub async fn wait_for_faults_consumed(&self) -> bool {
        self.wait_until(|s| async move {
            s.get_json("/_faults").await["faults"]
                .as_array()
                .unwrap()
                .is_empty()
        })
        .await
    }

    async fn wait_until<'a, F, Fut>(&'a self, check: F) -> bool
    where
        F: Fn(&'a Self) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..1000 {
            if check(self).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// `POST /_faults`, asserting it was queued.
    pub async fn fault(&self, fault: Value) {
        let response = self.post("/_faults", &fault).await;
        assert_eq!(response.status(), 201, "{fault}");
    }

    /// `POST /_config` with `ignore_idempotency_keys`.
    pub async fn ignore_keys(&self, ignore: bool) -> Response {
        self.post("/_config", &json!({"ignore_idempotency_keys": ignore}))
            .await
    }

    /// `POST /_reset`.
    pub async fn reset(&self) -> Response {
        self.post("/_reset", &json!({})).await
    }

    /// `POST` of a JSON body to any path.
    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.http
            .post(format!("{}{path}", self.address))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// `GET` of any path.
    pub async fn get(&self, path: &str) -> Response {
        self.http
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap()
    }

    /// `GET` of any path, as JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        let response = self.get(path).await;
        assert!(response.status().is_success(), "{path}: {response:?}");
        response.json().await.unwrap()
    }
}

/// The body as JSON.
pub async fn body(response: Response) -> Value {
    response.json().await.unwrap()
}

/// A header's value, if present.
pub fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}
