//! `idem bench`: one run on loopback that measures idem over HTTP next to its floors (the
//! store without HTTP, and a bare axum endpoint), on SQLite and PostgreSQL, and writes the
//! table to `latest.md` and `latest.json`.

mod floors;
mod idem;
mod peers;
mod report;
mod runner;
mod scenario;

#[cfg(test)]
mod tests;

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;
use floors::{HelloServer, HelloWorkload, StoreFloor};
use idem::{IdemHttp, IdemServer};
use report::{Report, Row};
use runner::Workload;
use scenario::{Engine, Scenario};

/// Options of `idem bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Seconds each scenario runs at each concurrency (1–20).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub seconds: u64,

    /// Numbers of concurrent tasks, comma-separated; every scenario runs at each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,16,64",
        value_parser = clap::value_parser!(u64).range(1..=1024)
    )]
    pub concurrency: Vec<u64>,

    /// The PostgreSQL server on which a fresh database is created for the run, then dropped;
    /// when it cannot be reached, the PostgreSQL rows are skipped (and the output says so).
    #[arg(
        long,
        env = "IDEM_TEST_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub postgres_url: String,

    /// Folder for `latest.md` and `latest.json` (with --peers: `peers.md` and `peers.json`).
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,

    #[command(flatten)]
    pub peers: peers::PeerArgs,
}

impl BenchArgs {
    fn duration(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }

    fn concurrencies(&self) -> impl Iterator<Item = usize> + '_ {
        self.concurrency.iter().map(|&c| c as usize)
    }
}

/// Runs every scenario, prints the table and writes the result files.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.peers.only {
        return peers::run(&args).await;
    }
    let mut rows = http_floor(&args).await?;
    let sqlite = TestDatabase::create(Backend::Sqlite).await;
    rows.extend(on_database(Engine::Sqlite, sqlite.url(), &args).await?);
    drop(sqlite);
    let mut skipped = Vec::new();
    match TestDatabase::postgres_on(&args.postgres_url).await {
        Ok(postgres) => rows.extend(on_database(Engine::Postgres, postgres.url(), &args).await?),
        Err(error) => {
            let why = format!("PostgreSQL rows: the server is unreachable ({error})");
            eprintln!("!!! SKIPPING {why} !!!");
            skipped.push(why);
        }
    }
    report::fill_ratios(&mut rows);
    let report = Report {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seconds_per_scenario: args.seconds,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rows,
        skipped,
    };
    write(&report, &args.out)?;
    println!("{}", report::markdown(&report));
    Ok(())
}

fn write(report: &Report, folder: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    let markdown = folder.join("latest.md");
    std::fs::write(&markdown, report::markdown(report))
        .with_context(|| format!("writing {}", markdown.display()))?;
    let json = folder.join("latest.json");
    let text = serde_json::to_string_pretty(report)? + "\n";
    std::fs::write(&json, text).with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}

async fn http_floor(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let server = HelloServer::start()
        .await
        .context("starting the axum floor")?;
    let mut rows = Vec::new();
    for concurrency in args.concurrencies() {
        let workload = Arc::new(HelloWorkload {
            client: reqwest::Client::new(),
            url: format!("{}/hello", server.base),
        });
        let measure = Measure::new(Scenario::AxumHello, None, concurrency, args);
        rows.push(measure.run(workload).await);
    }
    Ok(rows)
}

/// The store floor, then idem over HTTP, on one fresh database.
async fn on_database(engine: Engine, url: &str, args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let database = Database::open(url).await?;
    for concurrency in args.concurrencies() {
        let workload = Arc::new(StoreFloor::new(database.ledger_store()));
        let measure = Measure::new(
            Scenario::StoreClaimComplete,
            Some(engine),
            concurrency,
            args,
        );
        rows.push(measure.run(workload).await);
    }
    database.close().await;

    let server = IdemServer::start(url).await?;
    for scenario in Scenario::ON_A_DATABASE.into_iter().skip(1) {
        for concurrency in args.concurrencies() {
            let workload = IdemHttp::prepare(&server, scenario)
                .await
                .with_context(|| format!("preparing {}", scenario.label()))?;
            let measure = Measure::new(scenario, Some(engine), concurrency, args);
            rows.push(measure.run(Arc::new(workload)).await);
        }
    }
    server.stop().await;
    Ok(rows)
}

/// One row to measure.
struct Measure {
    scenario: Scenario,
    database: Option<Engine>,
    concurrency: usize,
    duration: Duration,
}

impl Measure {
    fn new(
        scenario: Scenario,
        database: Option<Engine>,
        concurrency: usize,
        args: &BenchArgs,
    ) -> Self {
        Self {
            scenario,
            database,
            concurrency,
            duration: args.duration(),
        }
    }

    async fn run(self, workload: Arc<dyn Workload>) -> Row {
        let database = self.database.map_or("no database", Engine::as_str);
        let label = self.scenario.label();
        eprintln!("{label} ({database}) at concurrency {}…", self.concurrency);
        let measured = runner::run_for(workload, self.concurrency, self.duration).await;
        if let Some(error) = &measured.first_error {
            eprintln!("  {} errors; the first: {error}", measured.errors);
        }
        Row {
            scenario: self.scenario,
            database: self.database,
            concurrency: self.concurrency,
            throughput: measured.throughput(),
            p50_ms: measured.percentile_ms(50.0),
            p99_ms: measured.percentile_ms(99.0),
            errors: measured.errors,
            ratio: None,
        }
    }
}
