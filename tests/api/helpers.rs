//! `TestApp` and `Client`: one helper per endpoint, so tests read as sentences.

use app::domain::{Role, Username};
use idem::config::ServeConfig;
use idem::startup::{AppState, Application};
use idem::storage::testing::{Backend, TestDatabase};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::{redirect, Response};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use idem::storage::testing::Backend as Db;

/// Declares each async test `fn name(backend: Backend)` once per database.
#[macro_export]
macro_rules! on_both_databases {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $test() { super::$test($crate::helpers::Db::Sqlite).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $test() { super::$test($crate::helpers::Db::Postgres).await; })*
        }
    };
}

/// A running application with its own database, stopped when dropped.
pub struct TestApp {
    pub address: String,
    pub state: AppState,
    pub database: TestDatabase,
    shutdown: Option<oneshot::Sender<()>>,
    running: Option<JoinHandle<std::io::Result<()>>>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// Builds and runs the application on the database until the returned sender fires or drops.
async fn start(
    database_url: &str,
    adjust: impl FnOnce(&mut ServeConfig),
) -> (
    String,
    AppState,
    oneshot::Sender<()>,
    JoinHandle<std::io::Result<()>>,
) {
    let mut config = ServeConfig::for_tests(database_url);
    adjust(&mut config);
    let application = Application::build(config)
        .await
        .expect("the application builds");
    let address = format!("http://{}", application.local_addr());
    let state = application.state().clone();
    let (shutdown, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(application.run_until(async move {
        let _ = stopped.await;
    }));
    (address, state, shutdown, running)
}

/// A second server on a `TestApp`'s database, stopped when dropped.
pub struct OtherServer {
    pub address: String,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Drop for OtherServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

impl TestApp {
    /// Starts the application on a fresh database of the given kind.
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, |_| {}).await
    }

    /// Starts the application after adjusting its configuration.
    pub async fn spawn_with(backend: Backend, adjust: impl FnOnce(&mut ServeConfig)) -> Self {
        let database = TestDatabase::create(backend).await;
        let (address, state, shutdown, running) = start(database.url(), adjust).await;
        Self {
            address,
            state,
            database,
            shutdown: Some(shutdown),
            running: Some(running),
        }
    }

    /// Stops the server and waits until it has closed its database, so that removing the
    /// database afterwards leaves nothing behind (dropping only asks the server to stop).
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(running) = self.running.take() {
            let _ = running.await;
        }
    }

    /// Another server on this app's database, as a second process would be (PostgreSQL).
    pub async fn spawn_beside(&self, adjust: impl FnOnce(&mut ServeConfig)) -> OtherServer {
        let (address, _, shutdown, _) = start(self.database.url(), adjust).await;
        OtherServer {
            address,
            shutdown: Some(shutdown),
        }
    }

    /// A client without credentials (it keeps cookies, like a browser).
    pub fn anonymous(&self) -> Client {
        Client::new(&self.address, HeaderMap::new())
    }

    /// Creates a person directly through the identity service.
    pub async fn create_person(&self, username: &str, role: Role, password: &str) {
        let username = Username::try_from(username).unwrap();
        self.state
            .identity
            .create_user(username, role, password)
            .await
            .expect("create the person");
    }

    /// A client signed in as a new person with this role.
    pub async fn person(&self, role: Role) -> Client {
        let username = format!("{}-{}", role.as_str(), uuid::Uuid::new_v4().simple());
        self.create_person(&username, role, "a long enough password")
            .await;
        let client = self.anonymous();
        let response = client.login(&username, "a long enough password").await;
        assert_eq!(response.status(), 200, "login as {username}");
        client
    }

    /// Creates an API key of the namespace and returns it.
    pub async fn api_key(&self, namespace: &str) -> String {
        let namespace = namespace.try_into().unwrap();
        let (_, secret) = self
            .state
            .identity
            .create_api_key(namespace, Some("test".into()))
            .await
            .unwrap();
        secret.expose().to_owned()
    }

    /// A client that sends `Authorization: Bearer <key>`.
    pub fn agent_with_key(&self, key: &str) -> Client {
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
        );
        Client::new(&self.address, headers)
    }

    /// A client holding a fresh API key of the namespace.
    pub async fn agent(&self, namespace: &str) -> Client {
        let key = self.api_key(namespace).await;
        self.agent_with_key(&key)
    }
}

/// An HTTP client with one method per endpoint.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

impl Client {
    /// A client of any server that sends `Authorization: Bearer <key>`.
    pub fn with_bearer(base: &str, key: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
        );
        Self::new(base, headers)
    }

    /// A client of any server without credentials (it keeps cookies, like a browser).
    pub fn anonymous(base: &str) -> Self {
        Self::new(base, HeaderMap::new())
    }

    pub fn new(base: &str, headers: HeaderMap) -> Self {
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .default_headers(headers)
            .redirect(redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            http,
            base: base.to_owned(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    /// A page, asked for as a browser does (`Accept: text/html`).
    pub async fn get_page(&self, path: &str) -> Response {
        let request = self.http.get(self.url(path)).header("accept", "text/html");
        request.send().await.unwrap()
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.http
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// Posts bytes as they are, with the given content type (or none).
    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
        content_type: Option<&str>,
    ) -> Response {
        let mut request = self.http.post(self.url(path)).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request.send().await.unwrap()
    }

    pub async fn login(&self, username: &str, password: &str) -> Response {
        self.post_json(
            "/auth/login",
            &json!({ "username": username, "password": password }),
        )
        .await
    }

    pub async fn logout(&self) -> Response {
        self.http
            .post(self.url("/auth/logout"))
            .send()
            .await
            .unwrap()
    }

    pub async fn me(&self) -> Response {
        self.get("/auth/me").await
    }

    pub async fn create_key(&self, body: &Value) -> Response {
        self.post_json("/v1/keys", body).await
    }

    pub async fn list_keys(&self) -> Response {
        self.get("/v1/keys").await
    }

    pub async fn revoke_key(&self, id: &str) -> Response {
        self.http
            .delete(self.url(&format!("/v1/keys/{id}")))
            .send()
            .await
            .unwrap()
    }

    pub async fn create_user(&self, body: &Value) -> Response {
        self.post_json("/v1/users", body).await
    }

    pub async fn put_tool(&self, name: &str, policy: &Value) -> Response {
        let url = self.url(&format!("/v1/tools/{name}"));
        self.http.put(url).json(policy).send().await.unwrap()
    }

    pub async fn list_users(&self) -> Response {
        self.get("/v1/users").await
    }

    /// `GET /v1/audit` with the given query string (`""`, `"?limit=2"`, …).
    pub async fn audit(&self, query: &str) -> Response {
        self.get(&format!("/v1/audit{query}")).await
    }
}

/// Asserts the contract's error shape and code, and returns the body.
pub async fn assert_error(response: Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status(), status, "status");
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        content_type.as_deref(),
        Some("application/json"),
        "content type"
    );
    let body: Value = response.json().await.expect("a JSON error body");
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["details"].is_object(), "{body}");
    body
}
