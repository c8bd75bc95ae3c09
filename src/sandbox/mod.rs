//! The sandbox provider (`idem sandbox-provider`): a real HTTP service that behaves like a
//! payments or email provider, for tests, the demo and benchmarks. It honours
//! `Idempotency-Key`, answers lookups by key, counts its effects and misbehaves on request.
//! State lives in memory; docs/providers.md, "The sandbox provider", documents the API.
//!
//! `Sandbox::bind` binds first, so tests can start it in-process on port 0.

mod connection;
mod faults;
mod handlers;
mod state;

use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::oneshot;

use connection::{Connection, KillableListener};
use state::State;

/// How long a stopping sandbox waits for calls in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The state every handler shares.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<State>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A handler that panicked left plain data behind; it is still consistent enough
        // for a test double.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A sandbox provider bound to its port, ready to run.
pub struct Sandbox {
    listener: TcpListener,
    state: Shared,
}

impl Sandbox {
    /// Binds the listener (port 0 picks a free port).
    pub async fn bind(address: impl ToSocketAddrs) -> std::io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(address).await?,
            state: Shared::default(),
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until SIGINT or SIGTERM.
    pub async fn run(self) -> std::io::Result<()> {
        self.run_until(crate::startup::shutdown_signal()).await
    }

    /// Serves until `shutdown` completes, then lets calls in flight finish for up to
    /// [`SHUTDOWN_GRACE`] (an injected delay can be minutes long).
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let address = self.local_addr();
        tracing::info!(%address, "the sandbox provider is listening");
        let service = router(self.state).into_make_service_with_connect_info::<Connection>();
        let (stopping, stop_requested) = oneshot::channel::<()>();
        let signal = async move {
            shutdown.await;
            let _ = stopping.send(());
        };
        let serve = axum::serve(KillableListener(self.listener), service)
            .with_graceful_shutdown(signal)
            .into_future();
        let grace_over = async move {
            if stop_requested.await.is_err() {
                // The server ended on its own: nothing to wait for.
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            served = serve => served?,
            () = grace_over => tracing::warn!("calls still in flight; stopping anyway"),
        }
        tracing::info!("the sandbox provider stopped");
        Ok(())
    }
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/healthz", get(handlers::healthz))
        .route("/actions/{name}", post(handlers::act))
        .route("/actions/{name}/lookup", get(handlers::lookup))
        .route("/_effects", get(handlers::effects))
        .route("/_faults", post(handlers::add_fault).get(handlers::faults))
        .route("/_config", post(handlers::set_config).get(handlers::config))
        .route("/_reset", post(handlers::reset))
        .with_state(state)
}
