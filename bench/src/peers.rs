//! `idem-bench --peers`: idem next to a peer that offers the same promise, Restate, in ONE
//! run on this machine. Restate (restate-server from npm and a trivial handler) is called
//! through its ingress with an `idempotency-key`: new keys, then repeated keys of completed
//! calls. Then idem does its counterparts, new claim + complete and replay, on SQLite and on
//! PostgreSQL. The table with idem/Restate per concurrency goes to `peers.md` and `peers.json`.

mod ingress;
mod restate;
mod table;

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

use super::idem::{IdemHttp, IdemServer};
use super::report::RunResult;
use super::runner::{self, Workload};
use super::scenario::Scenario;
use super::BenchArgs;
use ::idem::storage::testing::{Backend, TestDatabase};
use ingress::RestateCalls;
use restate::{RestateFacts, RestatePeer};
use table::{PeerReport, PeerRow, Step, System};

/// Options of `idem-bench` for the peer comparison.
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// Run only the comparison with Restate (new and repeated idempotency keys, next to idem's
    /// new claim+complete and replay on SQLite and PostgreSQL); writes `peers.md` and
    /// `peers.json`. Needs Node.js and `npm ci` in --restate-dir (`make bench-peers` does both).
    #[arg(long = "peers")]
    pub only: bool,

    /// The Restate peer's folder: package.json, handler.mjs and their node_modules.
    #[arg(long, default_value = "bench/peers/restate")]
    pub restate_dir: PathBuf,
}

/// Runs the comparison, prints its table and writes the files. Ctrl-C stops Restate's
/// processes and removes its data before returning.
pub async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let report = tokio::select! {
        report = measure(args) => report?,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted; Restate was stopped"),
    };
    super::write_results(&args.out, "peers", &table::markdown(&report), &report)?;
    println!("{}", table::markdown(&report));
    Ok(())
}

async fn measure(args: &BenchArgs) -> anyhow::Result<PeerReport> {
    let mut rows = Vec::new();
    let restate = on_restate(args, &mut rows).await?;
    let mut skipped = Vec::new();
    let sqlite = TestDatabase::create(Backend::Sqlite).await;
    rows.extend(on_idem(System::IdemSqlite, sqlite.url(), args).await?);
    drop(sqlite);
    match TestDatabase::postgres_on(&args.postgres_url).await {
        Ok(postgres) => rows.extend(on_idem(System::IdemPostgres, postgres.url(), args).await?),
        Err(error) => {
            let why = format!("idem on PostgreSQL: the server is unreachable ({error})");
            eprintln!("!!! SKIPPING {why} !!!");
            skipped.push(why);
        }
    }
    Ok(PeerReport {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seconds_per_scenario: args.seconds,
        runs: args.runs(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        restate,
        comparison: table::compare(&rows),
        rows,
        skipped,
    })
}

/// Starts Restate, measures it, and stops it before idem runs, so the two never share the
/// cores.
async fn on_restate(args: &BenchArgs, rows: &mut Vec<PeerRow>) -> anyhow::Result<RestateFacts> {
    eprintln!(
        "starting Restate from {}…",
        args.peers.restate_dir.display()
    );
    let peer = RestatePeer::start(&args.peers.restate_dir)
        .await
        .context("starting Restate")?;
    for step in Step::ALL {
        for concurrency in args.concurrencies() {
            let calls = async || -> anyhow::Result<Arc<dyn Workload>> {
                let calls = RestateCalls::prepare(&peer.ingress, step)
                    .await
                    .with_context(|| format!("preparing Restate's {}", step.label()))?;
                Ok(Arc::new(calls) as Arc<dyn Workload>)
            };
            rows.push(run_for(System::Restate, step, concurrency, args, calls).await?);
        }
    }
    Ok(peer.stop())
}

/// idem on one fresh database: new claim + complete, then replay.
async fn on_idem(system: System, url: &str, args: &BenchArgs) -> anyhow::Result<Vec<PeerRow>> {
    let server = IdemServer::start(url).await?;
    let mut rows = Vec::new();
    for step in Step::ALL {
        let scenario = match step {
            Step::New => Scenario::IdemNew,
            Step::Replay => Scenario::IdemReplay,
        };
        for concurrency in args.concurrencies() {
            let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
                let workload = IdemHttp::prepare(&server, scenario)
                    .await
                    .with_context(|| format!("preparing {}", scenario.label()))?;
                Ok(Arc::new(workload) as Arc<dyn Workload>)
            };
            rows.push(run_for(system, step, concurrency, args, workload).await?);
        }
    }
    server.stop().await;
    Ok(rows)
}

async fn run_for(
    system: System,
    step: Step,
    concurrency: usize,
    args: &BenchArgs,
    workload: impl AsyncFn() -> anyhow::Result<Arc<dyn Workload>>,
) -> anyhow::Result<PeerRow> {
    let (who, what) = (system.label(), step.label());
    let mut runs = Vec::with_capacity(args.runs());
    for run in 1..=args.runs() {
        eprint!(
            "{who}: {what} at concurrency {concurrency}, run {run}/{}… ",
            args.runs()
        );
        let measured = runner::run_for(workload().await?, concurrency, args.duration()).await;
        eprintln!("{:.0}/s", measured.throughput());
        if let Some(error) = &measured.first_error {
            eprintln!("  {} errors; the first: {error}", measured.errors);
        }
        runs.push(RunResult::from(&measured));
    }
    Ok(PeerRow::from_runs(system, step, concurrency, &runs))
}
