//! `idem serve --demo`: a living dashboard in one command. At start it runs the sandbox
//! provider in-process, registers tools of every effect class that call it, makes one person
//! per role with a fresh password (printed on stdout) and an API key of the namespace `demo`,
//! and then a simulated agent calls idem's own REST API over loopback with that key until the
//! server stops: new work, replays, in-flight duplicates, key reuse with other arguments,
//! unknowns that the reconciler settles, permanent errors and requests for approval.
//!
//! Everything goes through the same services and HTTP routes as real callers, so the demo
//! works on any database idem supports.

mod actions;
mod api;
mod guard;
mod people;
mod scenario;
mod tools;
mod workload;

use app::audit::{AuditLog, PersonAction};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::task::JoinHandle;

use crate::config::ServeConfig;
use crate::sandbox::Sandbox;
use crate::startup::AppState;
use crate::workers::{stopped, StopSignal};
use api::{AgentApi, CallError, Faults};
use people::DemoPerson;
use workload::Agent;

pub use guard::{admit, claim, DemoRefused};

/// The actor of what the demo sets up, in the audit of people.
const ACTOR: &str = "system";

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The sandbox provider could not bind a port.
    #[error("starting the demo's sandbox provider: {0}")]
    Sandbox(#[from] std::io::Error),
    /// Registering the demo's tools failed.
    #[error("registering the demo's tools: {0}")]
    Tools(#[from] app::ledger::LedgerError),
    /// Making the demo's people or API key failed.
    #[error("preparing the demo's people and key: {0}")]
    Identity(#[from] app::identity::IdentityError),
    /// The demo agent's HTTP clients could not be built.
    #[error("preparing the demo agent: {0}")]
    Agent(#[from] CallError),
}

/// The demo, set up and ready to run beside the server.
pub struct Demo {
    sandbox: Sandbox,
    agent: Agent,
    pace: Duration,
}

/// The demo's running tasks.
pub struct DemoTasks {
    sandbox: JoinHandle<std::io::Result<()>>,
    agent: JoinHandle<()>,
}

impl Demo {
    /// Sets up the sandbox, tools, people and key for a server listening on `address`, and
    /// prints where and how to sign in.
    pub async fn prepare(
        state: &AppState,
        config: &ServeConfig,
        address: SocketAddr,
    ) -> Result<Self, DemoError> {
        let sandbox = Sandbox::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let sandbox_url = format!("http://{}", sandbox.local_addr());
        tools::register(&state.ledger, &state.audit, &sandbox_url).await?;
        let people = people::ensure_people(&state.identity, &state.audit).await?;
        let key = people::fresh_agent_key(&state.identity, &state.audit).await?;
        announce(&public_base(config, address), &people);
        let api = AgentApi::new(format!("http://{}", loopback(address)), &key)?;
        Ok(Self {
            sandbox,
            agent: Agent::new(api, Faults::new(&sandbox_url)?),
            pace: Duration::from_millis(config.demo_pace_ms.max(1)),
        })
    }

    /// Starts the agent, which stops when `stop_agent` fires, and the sandbox, which stops
    /// when `stop_sandbox` fires (after the server, whose calls may still reach it).
    pub fn spawn(self, stop_agent: StopSignal, stop_sandbox: StopSignal) -> DemoTasks {
        tracing::info!(namespace = people::NAMESPACE, "the demo agent is starting");
        DemoTasks {
            sandbox: tokio::spawn(self.sandbox.run_until(stopped(stop_sandbox))),
            agent: tokio::spawn(self.agent.run(self.pace, stop_agent)),
        }
    }
}

impl DemoTasks {
    /// Waits for both tasks to end.
    pub async fn join(self) {
        let _ = self.agent.await;
        if let Ok(Err(error)) = self.sandbox.await {
            tracing::warn!(%error, "the demo's sandbox provider failed");
        }
    }
}

/// Writes what the demo set up to the audit of people, as the system.
async fn record(audit: &AuditLog, action: &'static str, subject: String, detail: Value) {
    audit
        .record(PersonAction {
            actor: ACTOR.into(),
            address: None,
            action,
            subject,
            detail,
        })
        .await;
}

/// The sign-in lines, on stdout (not the log), so a newcomer sees them among the log lines
/// and scripts can read them.
fn announce(base: &str, people: &[DemoPerson]) {
    for person in people {
        println!(
            "demo: sign in at {base}/login as {} with password {}",
            person.username, person.password
        );
    }
}

/// Where people reach the server: the configured public URL, else the listening address.
pub(crate) fn public_base(config: &ServeConfig, address: SocketAddr) -> String {
    match config.public_url.as_deref() {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", loopback(address)),
    }
}

/// The address to call the server at from this machine: a wildcard bind answers on loopback.
fn loopback(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, address.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => {
            (std::net::Ipv6Addr::LOCALHOST, address.port()).into()
        }
        _ => address,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_is_called_on_loopback() {
        let wildcard: SocketAddr = "0.0.0.0:3000".parse().unwrap();
        assert_eq!(loopback(wildcard).to_string(), "127.0.0.1:3000");
        let v6: SocketAddr = "[::]:3000".parse().unwrap();
        assert_eq!(loopback(v6).to_string(), "[::1]:3000");
        let bound: SocketAddr = "10.0.0.5:3000".parse().unwrap();
        assert_eq!(loopback(bound), bound);
    }
}
