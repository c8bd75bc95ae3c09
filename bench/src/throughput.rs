//! The throughput rows: the floors (axum hello, the store, pgbench) and idem over HTTP, each
//! scenario at each concurrency, `--runs` times, reported as medians.

use anyhow::Context;
use hyper::HeaderMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::floors::{HelloServer, HelloWorkload, StoreFloor};
use super::grouped::GroupedSqlite;
use super::idem::{IdemHttp, IdemServer};
use super::load_client::LoadClient;
use super::pgbench;
use super::report::{Row, RunResult};
use super::runner::{self, Measurement, Workload};
use super::scenario::{Engine, Scenario};
use super::sequential::SequentialSqlite;
use super::BenchArgs;
use ::idem::storage::testing::{Backend, TestDatabase};
use ::idem::storage::Database;

/// The axum floor: no database.
pub async fn http_floor(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let server = HelloServer::start()
        .await
        .context("starting the axum floor")?;
    let mut rows = Vec::new();
    for concurrency in args.concurrencies() {
        let measure = Measure::new(Scenario::AxumHello, None, concurrency, args);
        let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
            let client = LoadClient::new(&server.base, HeaderMap::new())?;
            let workload: Arc<dyn Workload> = Arc::new(HelloWorkload { client });
            Ok(workload)
        };
        rows.push(measure.run(workload).await?);
    }
    Ok(rows)
}

/// The pgbench floors on the run's PostgreSQL database: idem's writes as its schema stands,
/// then without the change stream's trigger (restored afterwards); or why there are none.
pub async fn pgbench_floors(url: &str, args: &BenchArgs) -> Result<Vec<Row>, String> {
    let pgbench =
        pgbench::find().ok_or("pgbench is not installed (on PATH or /usr/lib/postgresql/*/bin)")?;
    let script = pgbench::ScriptFile::write().map_err(|e| e.to_string())?;
    let floor = PgbenchFloor {
        pgbench: &pgbench,
        script: &script,
        url,
        args,
    };
    let mut rows = floor.rows(Scenario::PgbenchClaimComplete).await?;
    pgbench::announce_changes(url, false).await?;
    let unannounced = floor.rows(Scenario::PgbenchUnannouncedClaimComplete).await;
    pgbench::announce_changes(url, true).await?;
    rows.extend(unannounced?);
    Ok(rows)
}

/// One pgbench floor's runs on the run's database.
struct PgbenchFloor<'a> {
    pgbench: &'a std::path::Path,
    script: &'a pgbench::ScriptFile,
    url: &'a str,
    args: &'a BenchArgs,
}

impl PgbenchFloor<'_> {
    /// The scenario's row at each concurrency, each the median of `--runs` runs.
    async fn rows(&self, scenario: Scenario) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        for concurrency in self.args.concurrencies() {
            let mut runs = Vec::with_capacity(self.args.runs());
            for run in 1..=self.args.runs() {
                eprint!(
                    "{} (postgres) at concurrency {concurrency}, run {run}/{}… ",
                    scenario.label(),
                    self.args.runs()
                );
                let duration = self.args.duration();
                let result = pgbench::run(
                    self.pgbench,
                    self.script.path(),
                    self.url,
                    concurrency,
                    duration,
                )
                .await
                .map_err(|e| e.to_string())?;
                eprintln!("{:.0}/s", result.throughput);
                runs.push(result);
            }
            let engine = Some(Engine::Postgres);
            rows.push(Row::from_runs(scenario, engine, concurrency, &runs));
        }
        Ok(rows)
    }
}

/// The sequential SQLite floor, on a fresh database file of its own that idem migrated;
/// one task, whatever `--concurrency` says (it is the floor of a writer without group commit).
pub async fn sequential_sqlite_floor(args: &BenchArgs) -> anyhow::Result<Row> {
    let (database, path) = migrated_sqlite_file().await?;
    let measure = Measure::new(
        Scenario::SequentialSqliteClaimComplete,
        Some(Engine::Sqlite),
        1,
        args,
    );
    let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
        let floor = SequentialSqlite::open(&path).context("opening the sequential floor")?;
        let workload: Arc<dyn Workload> = Arc::new(floor);
        Ok(workload)
    };
    let row = measure.run(workload).await;
    drop(database);
    row
}

/// The grouped SQLite floor at each concurrency, on a fresh database file of its own that
/// idem migrated.
pub async fn grouped_sqlite_floor(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let (database, path) = migrated_sqlite_file().await?;
    let mut rows = Vec::new();
    for concurrency in args.concurrencies() {
        let scenario = Scenario::GroupedSqliteClaimComplete;
        let measure = Measure::new(scenario, Some(Engine::Sqlite), concurrency, args);
        let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
            let floor = GroupedSqlite::open(&path).context("opening the grouped floor")?;
            let workload: Arc<dyn Workload> = Arc::new(floor);
            Ok(workload)
        };
        rows.push(measure.run(workload).await?);
    }
    drop(database);
    Ok(rows)
}

/// A fresh SQLite file that idem migrated (gone with the first), and its path.
pub(super) async fn migrated_sqlite_file() -> anyhow::Result<(TestDatabase, PathBuf)> {
    let database = TestDatabase::create(Backend::Sqlite).await;
    Database::open(database.url()).await?.close().await;
    let path = database
        .sqlite_path()
        .context("a SQLite test database has a file")?
        .to_owned();
    Ok((database, path))
}

/// The store floor, then idem over HTTP, on one fresh database.
pub async fn on_database(engine: Engine, url: &str, args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let database = Database::open(url).await?;
    for concurrency in args.concurrencies() {
        let scenario = Scenario::StoreClaimComplete;
        let measure = Measure::new(scenario, Some(engine), concurrency, args);
        let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
            let workload: Arc<dyn Workload> = Arc::new(StoreFloor::new(database.ledger_store()));
            Ok(workload)
        };
        rows.push(measure.run(workload).await?);
    }
    database.close().await;

    let server = IdemServer::start(url).await?;
    for scenario in Scenario::ON_A_DATABASE.into_iter().skip(1) {
        for concurrency in args.concurrencies() {
            let measure = Measure::new(scenario, Some(engine), concurrency, args);
            // Fresh keys (and replayed or pending ones) for every run.
            let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
                let prepared = IdemHttp::prepare(&server, scenario)
                    .await
                    .with_context(|| format!("preparing {}", scenario.label()))?;
                let workload: Arc<dyn Workload> = Arc::new(prepared);
                Ok(workload)
            };
            rows.push(measure.run(workload).await?);
        }
        if scenario == Scenario::IdemNew {
            let peak = rows
                .iter()
                .filter(|row| row.scenario == scenario)
                .map(|row| row.throughput)
                .fold(0.0, f64::max);
            rows.extend(half_peak(&server, engine, peak, args).await?);
        }
    }
    server.stop().await;
    Ok(rows)
}

/// At most this many claims of the open loop run at once (its row's concurrency); at half of
/// peak far fewer do, unless the server stalls.
const OPEN_LOOP_MAX_IN_FLIGHT: usize = 256;

/// New claim+complete started at half of `peak` per second, `runs` times: a row for the
/// steps and one for their claims alone.
async fn half_peak(
    server: &IdemServer,
    engine: Engine,
    peak: f64,
    args: &BenchArgs,
) -> anyhow::Result<[Row; 2]> {
    let scenario = Scenario::IdemNewHalfPeak;
    let rate = peak / 2.0;
    let mut runs = Vec::with_capacity(args.runs());
    let mut claim_runs = Vec::with_capacity(args.runs());
    for run in 1..=args.runs() {
        eprint!(
            "{} ({}) at {rate:.0}/s, run {run}/{}… ",
            scenario.label(),
            engine.as_str(),
            args.runs()
        );
        let workload = Arc::new(IdemHttp::prepare(server, scenario).await?);
        let measured = runner::run_at_rate(
            workload.clone(),
            rate,
            OPEN_LOOP_MAX_IN_FLIGHT,
            args.duration(),
        )
        .await;
        let claims = Measurement {
            latency: workload.claim_latency().expect("kept for this scenario"),
            ..measured.clone()
        };
        eprintln!(
            "{:.0}/s, p99 {:.1} ms (claims alone {:.1} ms)",
            measured.throughput(),
            measured.percentile_ms(99.0),
            claims.percentile_ms(99.0)
        );
        runs.push(RunResult::from(&measured));
        claim_runs.push(RunResult::from(&claims));
    }
    let row = |scenario, runs: &[RunResult]| {
        Row::from_runs(scenario, Some(engine), OPEN_LOOP_MAX_IN_FLIGHT, runs)
    };
    Ok([
        row(scenario, &runs),
        row(Scenario::IdemClaimHalfPeak, &claim_runs),
    ])
}

/// One row to measure, `runs` times.
pub(super) struct Measure {
    scenario: Scenario,
    database: Option<Engine>,
    concurrency: usize,
    duration: Duration,
    runs: usize,
}

impl Measure {
    pub(super) fn new(
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
            runs: args.runs(),
        }
    }

    /// Measures each run on a workload made for it, and reports the medians.
    pub(super) async fn run(
        self,
        workload: impl AsyncFn() -> anyhow::Result<Arc<dyn Workload>>,
    ) -> anyhow::Result<Row> {
        let database = self.database.map_or("no database", Engine::as_str);
        let label = self.scenario.label();
        let mut runs = Vec::with_capacity(self.runs);
        for run in 1..=self.runs {
            eprint!(
                "{label} ({database}) at concurrency {}, run {run}/{}… ",
                self.concurrency, self.runs
            );
            let measured =
                runner::run_for(workload().await?, self.concurrency, self.duration).await;
            eprintln!("{:.0}/s", measured.throughput());
            if let Some(error) = &measured.first_error {
                eprintln!("  {} errors; the first: {error}", measured.errors);
            }
            runs.push(RunResult::from(&measured));
        }
        Ok(Row::from_runs(
            self.scenario,
            self.database,
            self.concurrency,
            &runs,
        ))
    }
}
