//! `idem-bench --peers`: idem next to a peer that offers the same promise, Restate, in ONE
//! run on this machine. Restate (restate-server from npm and a trivial handler) is called
//! through its ingress with an `idempotency-key`: new keys, then repeated keys of completed
//! calls. Then idem does its counterparts, new claim + complete and replay, on SQLite and on
//! PostgreSQL. Each step is measured twice: by the bench's own client and by wrk, an external
//! load generator, so that neither side is judged only by a client that lives beside idem.
//! The table with idem/Restate per concurrency and client, and issue #33's targets in both
//! views, go to `peers.md` and `peers.json`.

mod ingress;
mod restate;
mod table;
mod targets;

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

use super::idem::{IdemHttp, IdemServer};
use super::report::RunResult;
use super::runner::{self, Workload};
use super::scenario::Scenario;
use super::wrk::{self, Load, Wrk};
use super::BenchArgs;
use ::idem::storage::testing::{Backend, TestDatabase};
use ingress::RestateCalls;
use restate::{RestateFacts, RestatePeer};
use table::{Client, PeerReport, PeerRow, Step, System};

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
    let mut skipped = Vec::new();
    let wrk = Wrk::find()
        .map_err(|why| skip(&mut skipped, format!("the wrk rows: {why:#}")))
        .ok();
    let external = wrk.as_ref();
    let mut rows = Vec::new();
    let restate = on_restate(args, external, &mut rows).await?;
    let sqlite = TestDatabase::create(Backend::Sqlite).await;
    rows.extend(on_idem(System::IdemSqlite, sqlite.url(), args, external).await?);
    drop(sqlite);
    match TestDatabase::postgres_on(&args.postgres_url).await {
        Ok(postgres) => {
            rows.extend(on_idem(System::IdemPostgres, postgres.url(), args, external).await?);
        }
        Err(error) => skip(
            &mut skipped,
            format!("idem on PostgreSQL: the server is unreachable ({error})"),
        ),
    }
    let comparison = table::compare(&rows);
    Ok(PeerReport {
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seconds_per_scenario: args.seconds,
        runs: args.runs(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        restate,
        targets: targets::targets(&comparison),
        comparison,
        rows,
        skipped,
    })
}

/// Records, loudly, a part that did not run.
fn skip(skipped: &mut Vec<String>, why: String) {
    eprintln!("!!! SKIPPING {why} !!!");
    skipped.push(why);
}

/// Starts Restate, measures it, and stops it before idem runs, so the two never share the
/// cores.
async fn on_restate(
    args: &BenchArgs,
    external: Option<&Wrk>,
    rows: &mut Vec<PeerRow>,
) -> anyhow::Result<RestateFacts> {
    eprintln!(
        "starting Restate from {}…",
        args.peers.restate_dir.display()
    );
    let peer = RestatePeer::start(&args.peers.restate_dir)
        .await
        .context("starting Restate")?;
    let prepare = async |step: Step| {
        RestateCalls::prepare(&peer.ingress, step)
            .await
            .with_context(|| format!("preparing Restate's {}", step.label()))
    };
    for step in Step::ALL {
        for concurrency in args.concurrencies() {
            let calls = async || -> anyhow::Result<Arc<dyn Workload>> {
                Ok(Arc::new(prepare(step).await?) as Arc<dyn Workload>)
            };
            rows.push(run_for(System::Restate, step, concurrency, args, calls).await?);
            let Some(generator) = external else { continue };
            let target = async || -> anyhow::Result<wrk::Target> {
                Ok(match step {
                    Step::New => wrk::Target::new_keys(&peer.ingress, Load::RestateNew, None),
                    Step::Replay => prepare(step).await?.wrk_target(&peer.ingress),
                })
            };
            let measure = WrkMeasure::new(System::Restate, step, concurrency, args);
            rows.push(measure.run(generator, target).await?);
        }
    }
    Ok(peer.stop())
}

/// idem on one fresh database: new claim + complete, then replay.
async fn on_idem(
    system: System,
    url: &str,
    args: &BenchArgs,
    external: Option<&Wrk>,
) -> anyhow::Result<Vec<PeerRow>> {
    let server = IdemServer::start(url).await?;
    let prepare = async |scenario: Scenario| {
        IdemHttp::prepare(&server, scenario)
            .await
            .with_context(|| format!("preparing {}", scenario.label()))
    };
    let mut rows = Vec::new();
    for step in Step::ALL {
        let scenario = match step {
            Step::New => Scenario::IdemNew,
            Step::Replay => Scenario::IdemReplay,
        };
        for concurrency in args.concurrencies() {
            let workload = async || -> anyhow::Result<Arc<dyn Workload>> {
                Ok(Arc::new(prepare(scenario).await?) as Arc<dyn Workload>)
            };
            rows.push(run_for(system, step, concurrency, args, workload).await?);
            let Some(generator) = external else { continue };
            let target = async || -> anyhow::Result<wrk::Target> {
                let authorization = Some(server.authorization());
                Ok(match step {
                    Step::New => wrk::Target::new_keys(&server.base, Load::IdemNew, authorization),
                    Step::Replay => prepare(scenario)
                        .await?
                        .wrk_target(&server.base, authorization),
                })
            };
            let measure = WrkMeasure::new(system, step, concurrency, args);
            rows.push(measure.run(generator, target).await?);
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
    let client = Client::InProcess;
    Ok(PeerRow::from_runs(system, step, client, concurrency, &runs))
}

/// One row measured by wrk, `--runs` times.
struct WrkMeasure<'a> {
    system: System,
    step: Step,
    concurrency: usize,
    args: &'a BenchArgs,
}

impl<'a> WrkMeasure<'a> {
    fn new(system: System, step: Step, concurrency: usize, args: &'a BenchArgs) -> Self {
        Self {
            system,
            step,
            concurrency,
            args,
        }
    }

    /// Runs wrk on a target made for each run (new keys never meet an earlier run's).
    async fn run(
        self,
        wrk: &Wrk,
        target: impl AsyncFn() -> anyhow::Result<wrk::Target>,
    ) -> anyhow::Result<PeerRow> {
        let (who, what, runs) = (self.system.label(), self.step.label(), self.args.runs());
        let mut results = Vec::with_capacity(runs);
        for run in 1..=runs {
            let concurrency = self.concurrency;
            eprint!("{who}: {what} at concurrency {concurrency} by wrk, run {run}/{runs}… ");
            let summary = wrk
                .run(&target().await?, concurrency, self.args.duration())
                .await?;
            let result = summary.run_result();
            eprintln!("{:.0}/s", result.throughput);
            if summary.errors() > 0 {
                eprintln!(
                    "  {} errors; the first unexpected answer: {}",
                    summary.errors(),
                    summary.first_unexpected
                );
            }
            results.push(result);
        }
        Ok(PeerRow::from_runs(
            self.system,
            self.step,
            Client::Wrk,
            self.concurrency,
            &results,
        ))
    }
}
