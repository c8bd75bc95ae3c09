//! idem as `idem serve` processes (the release binary) on one PostgreSQL database: new
//! claim+complete through one process, then through two with the client's tasks split
//! between them (issue #33: two processes ≥ 1.6× one). Both rows start their servers the
//! same way, so their ratio compares like with like.

use anyhow::Context;
use std::path::Path;
use std::sync::Arc;

use super::dashboard::server::ChildServer;
use super::idem::{Endpoint, IdemHttp};
use super::report::Row;
use super::runner::Workload;
use super::scenario::{Engine, Scenario};
use super::throughput::Measure;
use super::BenchArgs;
use ::idem::storage::Database;
use app::identity::{Identity, IdentityPolicy};

/// `idem serve`'s options for the bench: one API key sending as fast as it can.
const SERVE_OPTIONS: [&str; 2] = ["--rate-limit-per-second", "0"];

/// The one-process row, then the two-process row, at each concurrency.
pub async fn on_postgres(url: &str, args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let authorization = format!("Bearer {}", api_key(url).await?);
    let mut rows = Vec::new();
    let kinds = [
        (Scenario::IdemNewOneProcess, 1),
        (Scenario::IdemNewTwoProcesses, 2),
    ];
    for (scenario, processes) in kinds {
        let servers = start(&args.idem_bin, url, processes).await?;
        let endpoints = servers
            .iter()
            .map(|server| Endpoint::new(&server.base, &authorization))
            .collect::<Result<Vec<_>, _>>()?;
        for concurrency in args.concurrencies() {
            let measure = Measure::new(scenario, Some(Engine::Postgres), concurrency, args);
            let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
                let prepared = IdemHttp::prepare_on(endpoints.clone(), scenario)
                    .await
                    .with_context(|| format!("preparing {}", scenario.label()))?;
                Ok(Arc::new(prepared) as Arc<dyn Workload>)
            };
            rows.push(measure.run(workload).await?);
        }
        for server in servers {
            server.stop().await;
        }
    }
    Ok(rows)
}

/// An API key of namespace `bench`, created in the database that the servers share.
async fn api_key(url: &str) -> anyhow::Result<String> {
    let database = Database::open(url).await?;
    let identity = Identity::new(database.identity_store(), IdentityPolicy::default());
    let (_, secret) = identity
        .create_api_key("bench".try_into()?, Some("bench processes".into()))
        .await?;
    database.close().await;
    Ok(secret.expose().to_owned())
}

async fn start(idem_bin: &Path, url: &str, count: usize) -> anyhow::Result<Vec<ChildServer>> {
    let mut servers = Vec::with_capacity(count);
    for _ in 0..count {
        let server = ChildServer::start_with(idem_bin, url, &SERVE_OPTIONS)
            .await
            .with_context(|| format!("starting {} serve", idem_bin.display()))?;
        servers.push(server);
    }
    Ok(servers)
}
