//! Building and running the application: the database, the services, the router and the
//! listener. `Application::build` binds first, so tests can start it on port 0 and ask for
//! the port.

use app::admin_actions::AdminActions;
use app::audit::{actions, AuditLog, PersonAction};
use app::identity::{Identity, IdentityPolicy, SessionCookie};
use app::ledger::metrics::Metrics;
use app::ledger::Ledger;
use app::people_actions::PeopleActions;
use axum::extract::FromRef;
use axum::serve::{ListenerExt, TapIo};
use axum::Router;
use leptos::config::{Env, LeptosOptions};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

use crate::config::ServeConfig;
use crate::demo::{self, Demo};
use crate::http;
use crate::http::admission::{Admission, Caps};
use crate::http::rate_limit::KeyRateLimit;
use crate::provider::HttpProvider;
use crate::storage::Database;
use crate::workers::{
    spawn_supervised, AlertWatch, ApprovalWebhook, LeaseReaper, MetricsRollup, Reconciler,
    Retention, Thresholds, Webhook, WebhookQueue, WorkerHealth,
};

/// What every handler and server function can reach. Handlers get it by value, so a clone
/// is one reference count, not one per service inside (that showed in a replay's profile).
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services behind [`AppState`].
pub struct Services {
    pub database: Database,
    pub audit: AuditLog,
    pub identity: Identity,
    pub ledger: Ledger,
    pub people_actions: PeopleActions,
    pub admin_actions: AdminActions,
    pub metrics: Metrics,
    pub session_cookie: SessionCookie,
    pub key_rate_limit: KeyRateLimit,
    pub leptos_options: LeptosOptions,
    /// Which background workers are down (for `/readyz`).
    pub workers: WorkerHealth,
    /// Caps on waiting requests and change streams.
    pub admission: Arc<Admission>,
    /// How often an idle change stream sends a comment and re-checks its caller.
    pub stream_keep_alive: Duration,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// How often the retention worker looks for expired operations and sessions.
const RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// A built application, bound to its port, ready to run.
pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    lease_reaper_interval: Duration,
    metrics_rollup_interval: Duration,
    reconcile_interval: Duration,
    /// How long operations are kept past their expiry; `None` keeps them forever.
    retention: Option<chrono::TimeDelta>,
    approval_webhook: Option<ApprovalWebhook>,
    alert_watch: Option<AlertWatch>,
    demo: Option<Demo>,
}

impl Application {
    /// Opens and migrates the database, bootstraps the first admin on an empty install, binds
    /// the listener and, with `--demo`, sets up the demo (which starts with [`Self::run`]).
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        if config.demo {
            demo::admit(&config).await?;
        }
        let database = Database::open_to_serve(&config.database.database_url).await?;
        let policy = IdentityPolicy {
            session_idle_timeout: chrono::Duration::from_std(config.session_idle)?,
            key_cache_max_age: Duration::from_millis(config.read_cache_ms),
            ..IdentityPolicy::default()
        };
        let identity = Identity::new(database.identity_store(), policy);
        let audit = AuditLog::new(database.audit_store());
        // The demo makes its own admin; a real install gets `admin`, who must choose a new
        // password at the first sign-in.
        let first_admin_password = if config.demo {
            demo::claim(&database, &config.database.database_url).await?;
            None
        } else {
            identity.ensure_first_admin().await?
        };
        if first_admin_password.is_some() {
            audit.record(first_admin_created()).await;
        }
        let listener = TcpListener::bind(&config.bind).await?;
        let site_addr = listener.local_addr()?;
        if let Some(password) = first_admin_password {
            announce_first_admin(&demo::public_base(&config, site_addr), &password);
        }
        let mut ledger = Ledger::new(database.ledger_store())
            .with_policy_cache(Duration::from_millis(config.read_cache_ms))
            .with_changes(database.changes().clone());
        let approval_webhook = match approval_webhook(&config)? {
            Some((queue, worker)) => {
                ledger = ledger.with_approval_notifier(queue);
                Some(worker)
            }
            None => None,
        };
        let ledger = ledger.with_provider(Arc::new(HttpProvider::new()?));
        let state = AppState(Arc::new(Services {
            people_actions: PeopleActions::new(ledger.clone(), audit.clone()),
            admin_actions: AdminActions::new(ledger.clone(), identity.clone(), audit.clone()),
            ledger,
            metrics: Metrics::new(database.metrics_store()).with_stuck_after(config.stuck_after),
            database,
            audit,
            identity,
            session_cookie: SessionCookie {
                secure: config.serves_https(),
            },
            workers: WorkerHealth::default(),
            admission: Admission::new(Caps {
                waits_per_key: config.max_waits_per_key,
                streams_per_key: config.max_streams_per_key,
                streams: config.max_streams,
            }),
            stream_keep_alive: Duration::from_millis(config.stream_keep_alive_ms),
            key_rate_limit: KeyRateLimit::new(
                config.rate_limit_per_second,
                config.rate_limit_burst,
            ),
            leptos_options: leptos_options(&config, site_addr),
        }));
        let alert_watch = alert_watch(&config, &state.ledger)?;
        let router = http::site::router(state.clone(), &config);
        let demo = if config.demo {
            Some(Demo::prepare(&state, &config, site_addr).await?)
        } else {
            None
        };
        Ok(Self {
            listener,
            router,
            state,
            lease_reaper_interval: Duration::from_millis(config.lease_reaper_interval_ms.max(10)),
            metrics_rollup_interval: Duration::from_millis(
                config.metrics_rollup_interval_ms.max(10),
            ),
            reconcile_interval: Duration::from_millis(config.reconcile_interval_ms.max(10)),
            retention: (config.retention_days > 0)
                .then(|| chrono::TimeDelta::days(config.retention_days.min(36_500) as i64)),
            approval_webhook,
            alert_watch,
            demo,
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The shared state (tests use its services to set up data).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until SIGINT or SIGTERM, then lets in-flight requests finish.
    pub async fn run(self) -> std::io::Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Serves until `shutdown` completes, then lets in-flight requests finish.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        tracing::info!(address = %self.local_addr(), "idem is listening");
        let (stop_workers, stop) = tokio::sync::watch::channel(false);
        let health = &self.state.workers;
        let webhook = self.approval_webhook.map(|worker| {
            spawn_supervised("approval_webhook", health, &stop, move |stop| {
                worker.clone().run(stop)
            })
        });
        let reaper = LeaseReaper::new(self.state.ledger.clone(), self.lease_reaper_interval);
        let reaper = spawn_supervised("lease_reaper", health, &stop, move |stop| {
            reaper.clone().run(stop)
        });
        let rollup = MetricsRollup::new(self.state.metrics.clone(), self.metrics_rollup_interval);
        let rollup = spawn_supervised("metrics_rollup", health, &stop, move |stop| {
            rollup.clone().run(stop)
        });
        let reconciler = Reconciler::new(self.state.ledger.clone(), self.reconcile_interval);
        let reconciler = spawn_supervised("reconciler", health, &stop, move |stop| {
            reconciler.clone().run(stop)
        });
        let alerts = self.alert_watch.map(|watch| {
            spawn_supervised("alert_watch", health, &stop, move |stop| {
                watch.clone().run(stop)
            })
        });
        let retention = self.retention.map(|keep| {
            let worker = Retention::new(self.state.database.clone(), keep, RETENTION_INTERVAL);
            spawn_supervised("retention", health, &stop, move |stop| {
                worker.clone().run(stop)
            })
        });
        // The demo agent stops when the shutdown starts, so it sends nothing the server
        // would have to finish; its sandbox stops with the workers, after the last request.
        let (stop_demo_agent, demo_agent_stop) = tokio::sync::watch::channel(false);
        let demo = self
            .demo
            .map(|demo| demo.spawn(demo_agent_stop, stop.clone()));
        let service = self
            .router
            .into_make_service_with_connect_info::<SocketAddr>();
        // Open change streams never end by themselves: they are ended when the shutdown starts.
        let changes = self.state.database.changes().clone();
        let shutdown = async move {
            shutdown.await;
            let _ = stop_demo_agent.send(true);
            changes.close();
        };
        axum::serve(without_nagle(self.listener), service)
            .with_graceful_shutdown(shutdown)
            .await?;
        let _ = stop_workers.send(true);
        let _ = reaper.await;
        let _ = rollup.await;
        let _ = reconciler.await;
        if let Some(retention) = retention {
            let _ = retention.await;
        }
        if let Some(webhook) = webhook {
            let _ = webhook.await;
        }
        if let Some(alerts) = alerts {
            let _ = alerts.await;
        }
        if let Some(demo) = demo {
            demo.join().await;
        }
        self.state.database.close().await;
        tracing::info!("idem stopped");
        Ok(())
    }
}

/// The HTTP client for calls idem makes itself; one per process, so connections are pooled.
fn outbound_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("idem/", env!("CARGO_PKG_VERSION")))
        // A redirect would send the request, with what it carries, to an address nobody
        // configured; a 3xx is answered as a failed delivery instead.
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// The alert watcher, if `IDEM_ALERT_WEBHOOK_URL` is set.
fn alert_watch(config: &ServeConfig, ledger: &Ledger) -> anyhow::Result<Option<AlertWatch>> {
    let Some(url) = config.alert_webhook_url.as_deref() else {
        return Ok(None);
    };
    let url = webhook_url(url, "IDEM_ALERT_WEBHOOK_URL")?;
    let webhook = Webhook::new(
        outbound_client()?,
        url,
        retry_delays(&config.approval_webhook_retry_ms),
        "alert webhook",
    );
    let thresholds = Thresholds {
        stuck_after: config.stuck_after,
        stuck_unknowns: config.alert_stuck_unknowns,
        approval_wait: chrono::TimeDelta::minutes(config.alert_approval_wait_minutes.into()),
        reconcile_attempts: config.alert_reconcile_attempts,
    };
    Ok(Some(AlertWatch::new(
        ledger.clone(),
        webhook,
        thresholds,
        Duration::from_millis(config.alert_interval_ms),
        config.public_url.as_deref(),
    )))
}

/// A webhook's URL from the setting `name`: http or https only.
fn webhook_url(url: &str, name: &str) -> anyhow::Result<reqwest::Url> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or_else(|| anyhow::anyhow!("{name} must be an http(s) URL"))
}

fn retry_delays(milliseconds: &[u64]) -> Vec<Duration> {
    milliseconds
        .iter()
        .map(|ms| Duration::from_millis(*ms))
        .collect()
}

/// The approval webhook's worker and the queue the ledger feeds, if a URL is configured.
fn approval_webhook(
    config: &ServeConfig,
) -> anyhow::Result<Option<(std::sync::Arc<WebhookQueue>, ApprovalWebhook)>> {
    let Some(url) = config.approval_webhook_url.as_deref() else {
        return Ok(None);
    };
    let url = webhook_url(url, "IDEM_APPROVAL_WEBHOOK_URL")?;
    let client = outbound_client()?;
    let delays = retry_delays(&config.approval_webhook_retry_ms);
    Ok(Some(ApprovalWebhook::new(
        client,
        url,
        config.public_url.as_deref(),
        delays,
    )))
}

/// The first admin's password, on stdout only: never in the log, which may be shipped and
/// kept elsewhere. The log says where to look.
fn announce_first_admin(base: &str, password: &str) {
    tracing::warn!(
        username = "admin",
        "created the first user; its password is printed on stdout, once, and must be \
         changed at the first sign-in"
    );
    println!(
        "first start: sign in at {base}/login as admin with password {password} \
         (you will be asked to choose a new one)"
    );
}

/// The audit entry of the bootstrap: the system made the first admin.
fn first_admin_created() -> PersonAction {
    PersonAction {
        actor: "system".into(),
        address: None,
        action: actions::USER_CREATED,
        subject: "user:admin".into(),
        detail: serde_json::json!({ "role": "admin", "first_user": true }),
    }
}

fn leptos_options(config: &ServeConfig, site_addr: SocketAddr) -> LeptosOptions {
    LeptosOptions::builder()
        .output_name("idem")
        .site_root(config.site_root.to_string_lossy().as_ref())
        .site_pkg_dir("pkg")
        .env(Env::PROD)
        .site_addr(site_addr)
        .build()
}

/// Accepts connections with `TCP_NODELAY` set. A page is streamed in several writes, and
/// with Nagle's algorithm the later ones waited for the client's delayed ACK of the first:
/// the first request of each page on a connection took 40 ms more.
fn without_nagle(listener: TcpListener) -> TapIo<TcpListener, fn(&mut TcpStream)> {
    listener.tap_io(|connection| {
        if let Err(error) = connection.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY could not be set on a connection");
        }
    })
}

/// Completes on SIGINT or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled: a SIGTERM that arrives after the server said it is listening
/// but before the serve loop first polls its shutdown (the workers and the demo start in
/// between) must begin a graceful shutdown, not kill the process with the default action.
pub(crate) fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, Signal, SignalKind};

    async fn received(signal: std::io::Result<Signal>) {
        match signal {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    }
    let interrupt = received(signal(SignalKind::interrupt()));
    let terminate = received(signal(SignalKind::terminate()));
    async move {
        tokio::select! {
            () = interrupt => {},
            () = terminate => {},
        }
        tracing::info!("shutting down: finishing requests in flight");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;

    #[tokio::test]
    async fn connections_are_accepted_without_nagle() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut listener = without_nagle(listener);
        let (connected, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        let client = connected.unwrap();
        let (server_side, peer) = accepted;
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(
            server_side.nodelay().unwrap(),
            "TCP_NODELAY on the accepted connection"
        );
        assert!(
            !client.nodelay().unwrap(),
            "off unless set, so the check can fail"
        );
    }
}
