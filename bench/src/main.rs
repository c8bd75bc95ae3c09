//! `idem-bench` (`make bench`): one run on loopback that measures idem over HTTP next to its floors (the
//! store without HTTP, pgbench, and a bare axum endpoint) on SQLite and PostgreSQL, the
//! dashboard with many operations stored, the server's memory and the bundle's size, checks
//! issue #7's targets, and writes the tables to `latest.md` and `latest.json`.
//!
//! Each part is one function adding to [`Collected`]; [`finish`] turns it into the report.

mod bundle;
mod dashboard;
mod floors;
mod grouped;
mod idem;
mod load_client;
mod peers;
mod pgbench;
mod processes;
mod report;
mod runner;
mod scenario;
mod sequential;
mod targets;
mod throughput;
mod wrk;

#[cfg(test)]
mod tests;

use anyhow::Context;
use clap::{Args, Parser};
use std::path::PathBuf;
use std::time::Duration;

use ::idem::storage::testing::{Backend, TestDatabase};
use ::idem::storage::Database;
use report::{Report, Resource, Row};
use scenario::Engine;
use targets::PeerRates;

// idem runs in this process, so it gets the allocator the server binary ships with: under
// glibc's malloc its replays measured a third slower than the server they stand for.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The command line: the options of a run.
#[derive(Debug, Parser)]
#[command(
    name = "idem-bench",
    version,
    about = "Measure idem over HTTP against its floors \
    (the store alone, pgbench, a bare axum endpoint) on SQLite and PostgreSQL, in one run on \
    loopback; writes latest.md and latest.json"
)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run(Cli::parse().args).await
}

/// Options of a run.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Seconds each scenario runs at each concurrency (1–20).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub seconds: u64,

    /// Numbers of concurrent tasks, comma-separated; every scenario runs at each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,16,32,64",
        value_parser = clap::value_parser!(u64).range(1..=1024)
    )]
    pub concurrency: Vec<u64>,

    /// Times each scenario runs at each concurrency; a row reports the medians (1–9).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=9))]
    pub runs: u64,

    /// The PostgreSQL server on which a fresh database is created for the run, then dropped;
    /// when it cannot be reached, the PostgreSQL rows are skipped (and the output says so).
    #[arg(
        long,
        env = "IDEM_TEST_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub postgres_url: String,

    /// Operations stored before the dashboard's reads are timed, on each database; 0 skips
    /// the dashboard.
    #[arg(
        long,
        default_value_t = 1_000_000,
        value_parser = clap::value_parser!(u64).range(0..=100_000_000)
    )]
    pub dashboard_operations: u64,

    /// The idem server the dashboard rows start (`make build` leaves it here).
    #[arg(long, default_value = "target/release/idem")]
    pub idem_bin: PathBuf,

    /// Run only the dashboard part (seed, then time each read) and write `dashboard.md` and
    /// `dashboard.json`, leaving a full run's files as they are.
    #[arg(long)]
    pub dashboard_only: bool,

    /// Run only these parts, comma-separated, and write `partial.md` and `partial.json`,
    /// leaving a full run's files as they are (e.g. `--parts postgres --concurrency 64` for
    /// PostgreSQL's rows and its open loop alone).
    #[arg(long, value_delimiter = ',', default_values_t = Part::ALL)]
    pub parts: Vec<Part>,

    /// Leave the dashboard's seeded databases in place and print their URLs, to read their
    /// query plans afterwards; dropping them is then up to you.
    #[arg(long)]
    pub keep_databases: bool,

    /// The hydrate bundle's folder, as `cargo leptos build --release` leaves it.
    #[arg(long, default_value = "target/site/pkg")]
    pub site_pkg: PathBuf,

    /// Folder for `latest.md` and `latest.json` (with --peers: `peers.md` and `peers.json`).
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,

    #[command(flatten)]
    pub peers: peers::PeerArgs,
}

/// A part of a full run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The floors on no database of idem's: axum hello, the rusqlite floors, pgbench.
    Floors,
    /// idem in this process on SQLite: the store floor, then every HTTP scenario.
    Sqlite,
    /// idem in this process on PostgreSQL: the store floor, then every HTTP scenario.
    Postgres,
    /// One and two `idem serve` processes on PostgreSQL.
    Processes,
    /// The dashboard's reads with many operations stored.
    Dashboard,
    /// The hydrate bundle's size.
    Bundle,
}

impl Part {
    const ALL: [Part; 6] = [
        Part::Floors,
        Part::Sqlite,
        Part::Postgres,
        Part::Processes,
        Part::Dashboard,
        Part::Bundle,
    ];
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        let name = self.to_possible_value().expect("no part is skipped");
        f.write_str(name.get_name())
    }
}

impl BenchArgs {
    /// Whether this run measures `part`.
    fn runs_part(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }

    /// Whether this run measures every part (and so is a full run).
    fn runs_every_part(&self) -> bool {
        Part::ALL.iter().all(|&part| self.runs_part(part))
    }

    fn duration(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }

    fn concurrencies(&self) -> impl Iterator<Item = usize> + '_ {
        self.concurrency.iter().map(|&c| c as usize)
    }

    fn runs(&self) -> usize {
        self.runs as usize
    }
}

/// Runs every part, prints the tables and writes the result files.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.peers.only {
        return peers::run(&args).await;
    }
    let mut collected = Collected::default();
    if args.dashboard_only {
        measure_dashboard(&args, &mut collected).await?;
        return finish(collected, &args, "dashboard", |rows, resources| {
            targets::dashboard_targets(rows, resources)
        });
    }
    measure_throughput(&args, &mut collected).await?;
    if args.runs_part(Part::Dashboard) {
        measure_dashboard(&args, &mut collected).await?;
    }
    if args.runs_part(Part::Bundle) {
        measure_bundle(&args, &mut collected);
    }
    let name = if args.runs_every_part() {
        "latest"
    } else {
        "partial"
    };
    finish(collected, &args, name, |rows, resources| {
        targets::targets(rows, resources, &PeerRates::default())
    })
}

/// What the parts of a run have measured so far, and what they skipped.
#[derive(Default)]
struct Collected {
    rows: Vec<Row>,
    resources: Vec<Resource>,
    skipped: Vec<String>,
}

impl Collected {
    /// Records, loudly, a part that did not run.
    fn skip(&mut self, why: String) {
        eprintln!("!!! SKIPPING {why} !!!");
        self.skipped.push(why);
    }
}

/// The floors and idem's throughput, on SQLite then PostgreSQL, as far as `--parts` asks.
async fn measure_throughput(args: &BenchArgs, collected: &mut Collected) -> anyhow::Result<()> {
    if args.runs_part(Part::Floors) {
        collected.rows.extend(throughput::http_floor(args).await?);
        collected
            .rows
            .push(throughput::sequential_sqlite_floor(args).await?);
        collected
            .rows
            .extend(throughput::grouped_sqlite_floor(args).await?);
    }
    if args.runs_part(Part::Sqlite) {
        let sqlite = TestDatabase::create(Backend::Sqlite).await;
        collected
            .rows
            .extend(throughput::on_database(Engine::Sqlite, sqlite.url(), args).await?);
    }
    let on_postgres = [Part::Floors, Part::Postgres, Part::Processes];
    if on_postgres.iter().any(|&part| args.runs_part(part)) {
        measure_on_postgres(args, collected).await?;
    }
    Ok(())
}

/// pgbench's floors, idem's rows and the server processes' on one fresh PostgreSQL database,
/// as far as `--parts` asks.
async fn measure_on_postgres(args: &BenchArgs, collected: &mut Collected) -> anyhow::Result<()> {
    let postgres = match TestDatabase::postgres_on(&args.postgres_url).await {
        Ok(postgres) => postgres,
        Err(error) => {
            collected.skip(format!(
                "PostgreSQL rows: the server is unreachable ({error})"
            ));
            return Ok(());
        }
    };
    // The schema first: pgbench runs on it before idem has opened the database.
    Database::open(postgres.url()).await?.close().await;
    if args.runs_part(Part::Floors) {
        match throughput::pgbench_floors(postgres.url(), args).await {
            Ok(rows) => collected.rows.extend(rows),
            Err(why) => collected.skip(format!("floor: pgbench claim+complete: {why}")),
        }
    }
    if args.runs_part(Part::Postgres) {
        let rows = throughput::on_database(Engine::Postgres, postgres.url(), args).await?;
        collected.rows.extend(rows);
    }
    if args.runs_part(Part::Processes) {
        measure_server_processes(postgres.url(), args, collected).await?;
    }
    Ok(())
}

/// One and two `idem serve` processes on the run's PostgreSQL database, when the release
/// server is built.
async fn measure_server_processes(
    url: &str,
    args: &BenchArgs,
    collected: &mut Collected,
) -> anyhow::Result<()> {
    if !args.idem_bin.is_file() {
        collected.skip(format!(
            "server process rows: no {} (build it with `make build`)",
            args.idem_bin.display()
        ));
        return Ok(());
    }
    let rows = processes::on_postgres(url, args).await?;
    collected.rows.extend(rows);
    Ok(())
}

/// The dashboard with `--dashboard-operations` stored, on SQLite then PostgreSQL.
async fn measure_dashboard(args: &BenchArgs, collected: &mut Collected) -> anyhow::Result<()> {
    let operations = args.dashboard_operations;
    if operations == 0 {
        collected.skip("dashboard rows: --dashboard-operations 0".into());
        return Ok(());
    }
    let sqlite = TestDatabase::create(Backend::Sqlite).await;
    let server = &args.idem_bin;
    let measured = dashboard::on_database(server, Engine::Sqlite, sqlite.url(), operations)
        .await
        .context("the dashboard on SQLite")?;
    collected.add_dashboard(measured);
    done_with(sqlite, args);
    match TestDatabase::postgres_on(&args.postgres_url).await {
        Ok(postgres) => {
            let measured =
                dashboard::on_database(server, Engine::Postgres, postgres.url(), operations)
                    .await
                    .context("the dashboard on PostgreSQL")?;
            collected.add_dashboard(measured);
            done_with(postgres, args);
        }
        Err(error) => collected.skip(format!(
            "PostgreSQL dashboard rows: the server is unreachable ({error})"
        )),
    }
    Ok(())
}

/// Drops a seeded database, or with `--keep-databases` leaves it and says where it is.
fn done_with(database: TestDatabase, args: &BenchArgs) {
    if args.keep_databases {
        eprintln!("kept the seeded database {}", database.keep());
    }
}

impl Collected {
    fn add_dashboard(&mut self, measured: dashboard::DashboardResult) {
        self.rows.extend(measured.rows);
        self.resources.extend(measured.resources);
    }
}

/// The hydrate bundle's gzipped size, when the UI was built.
fn measure_bundle(args: &BenchArgs, collected: &mut Collected) {
    match bundle::gzipped_kb(&args.site_pkg) {
        Ok(Some(kb)) => collected.resources.push(Resource {
            name: targets::BUNDLE.into(),
            database: None,
            value: kb,
            unit: "KB",
        }),
        Ok(None) => collected.skip(format!(
            "hydrate bundle: no idem.wasm in {} (build it with `cargo leptos build --release`)",
            args.site_pkg.display()
        )),
        Err(error) => collected.skip(format!("hydrate bundle: {error}")),
    }
}

/// Ratios and the targets `judge` finds in everything measured; prints the tables and writes
/// them to `NAME.md` and `NAME.json`.
fn finish(
    collected: Collected,
    args: &BenchArgs,
    name: &str,
    judge: impl Fn(&[Row], &[Resource]) -> Vec<targets::TargetResult>,
) -> anyhow::Result<()> {
    let Collected {
        mut rows,
        resources,
        skipped,
    } = collected;
    report::fill_ratios(&mut rows);
    let targets = judge(&rows, &resources);
    let report = Report {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seconds_per_scenario: args.seconds,
        runs: args.runs(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rows,
        resources,
        targets,
        skipped,
    };
    write_results(&args.out, name, &report::markdown(&report), &report)?;
    println!("{}", report::markdown(&report));
    Ok(())
}

/// Writes a table as `NAME.md` and its data as `NAME.json` in `folder`.
fn write_results(
    folder: &std::path::Path,
    name: &str,
    markdown: &str,
    data: &impl serde::Serialize,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    let markdown_file = folder.join(format!("{name}.md"));
    std::fs::write(&markdown_file, markdown)
        .with_context(|| format!("writing {}", markdown_file.display()))?;
    let json_file = folder.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(data)? + "\n";
    std::fs::write(&json_file, text).with_context(|| format!("writing {}", json_file.display()))?;
    Ok(())
}

/// The completed key a replay step asks for: tasks are spread over the keys so they do not
/// all read the same row in step.
fn replay_key(completed: &[String], task: usize, seq: u64) -> Result<&str, runner::StepError> {
    let index = (task * 7 + seq as usize) % completed.len().max(1);
    completed
        .get(index)
        .map(String::as_str)
        .ok_or_else(|| runner::StepError::Outcome("no completed keys to replay".into()))
}
