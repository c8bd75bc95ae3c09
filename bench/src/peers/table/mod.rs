//! The peer comparison's results: one row per (system, step, concurrency), the ratio
//! idem/Restate per step and concurrency, and the file as Markdown and JSON. Pure functions,
//! tested without running anything.

use serde::Serialize;
use std::fmt::Write as _;

use super::restate::RestateFacts;
use crate::report::RunResult;
use crate::targets::{self, TargetResult};

/// Who answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum System {
    Restate,
    IdemSqlite,
    IdemPostgres,
}

impl System {
    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            System::Restate => "Restate",
            System::IdemSqlite => "idem (sqlite)",
            System::IdemPostgres => "idem (postgres)",
        }
    }
}

/// What one measured step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// A key never seen: idem's claim + complete, Restate's call that runs the handler.
    New,
    /// A key whose operation completed: the stored outcome is answered.
    Replay,
}

impl Step {
    /// Both, in table order.
    pub const ALL: [Step; 2] = [Step::New, Step::Replay];

    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Step::New => "new key",
            Step::Replay => "repeated key",
        }
    }
}

/// Which load generator sent the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Client {
    /// The bench's own tasks (hyper's HTTP/1.1 connections, keep-alive), in the bench's
    /// process.
    InProcess,
    /// `wrk` with `bench/src/wrk/load.lua`, a process of its own.
    Wrk,
}

impl Client {
    /// Both, in table order.
    pub const ALL: [Client; 2] = [Client::InProcess, Client::Wrk];

    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Client::InProcess => "bench client",
            Client::Wrk => "wrk",
        }
    }
}

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerRow {
    pub system: System,
    pub step: Step,
    pub client: Client,
    pub concurrency: usize,
    /// Successful steps per second.
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
    /// Each run's throughput, in run order; the figures above are the runs' medians.
    pub runs: Vec<f64>,
}

impl PeerRow {
    /// A row from its runs: their medians, and every run's throughput kept.
    pub fn from_runs(
        system: System,
        step: Step,
        client: Client,
        concurrency: usize,
        runs: &[RunResult],
    ) -> Self {
        let medians = RunResult::medians(runs);
        PeerRow {
            system,
            step,
            client,
            concurrency,
            throughput: medians.throughput,
            p50_ms: medians.p50_ms,
            p99_ms: medians.p99_ms,
            errors: medians.errors,
            runs: runs.iter().map(|run| run.throughput).collect(),
        }
    }
}

/// idem next to Restate for one step kind at one concurrency, both driven by one client.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub step: Step,
    pub concurrency: usize,
    pub client: Client,
    pub restate: Option<f64>,
    pub idem_sqlite: Option<f64>,
    /// idem on SQLite's throughput divided by Restate's.
    pub sqlite_ratio: Option<f64>,
    pub idem_postgres: Option<f64>,
    /// idem on PostgreSQL's throughput divided by Restate's.
    pub postgres_ratio: Option<f64>,
}

/// Everything one `--peers` run produced.
#[derive(Debug, Serialize)]
pub struct PeerReport {
    /// When the run ended (RFC 3339).
    pub generated_at: String,
    pub seconds_per_scenario: u64,
    /// Runs per row; a row's figures are the medians of its runs.
    pub runs: usize,
    pub cores: usize,
    pub restate: RestateFacts,
    pub rows: Vec<PeerRow>,
    pub comparison: Vec<Comparison>,
    /// Issue #33's targets against Restate, in each client's view.
    pub targets: Vec<TargetResult>,
    /// What did not run, and why.
    pub skipped: Vec<String>,
}

/// `idem / restate`, when both were measured and Restate managed anything at all.
pub fn ratio(idem: Option<f64>, restate: Option<f64>) -> Option<f64> {
    match (idem, restate) {
        (Some(idem), Some(restate)) if restate > 0.0 => Some(idem / restate),
        _ => None,
    }
}

/// One comparison per (step, concurrency, client) measured on any system: steps in table
/// order, concurrencies ascending, and the two clients' views of each next to each other.
pub fn compare(rows: &[PeerRow]) -> Vec<Comparison> {
    let mut keys: Vec<(Step, usize, Client)> = rows
        .iter()
        .map(|row| (row.step, row.concurrency, row.client))
        .collect();
    let order = |(step, concurrency, client): &(Step, usize, Client)| {
        let step = Step::ALL.iter().position(|s| s == step);
        let client = Client::ALL.iter().position(|c| c == client);
        (step, *concurrency, client)
    };
    keys.sort_by_key(order);
    keys.dedup();
    keys.into_iter()
        .map(|(step, concurrency, client)| {
            let throughput = |system| {
                rows.iter()
                    .find(|r| {
                        r.system == system
                            && r.step == step
                            && r.concurrency == concurrency
                            && r.client == client
                    })
                    .map(|r| r.throughput)
            };
            let restate = throughput(System::Restate);
            let idem_sqlite = throughput(System::IdemSqlite);
            let idem_postgres = throughput(System::IdemPostgres);
            Comparison {
                step,
                concurrency,
                client,
                restate,
                idem_sqlite,
                sqlite_ratio: ratio(idem_sqlite, restate),
                idem_postgres,
                postgres_ratio: ratio(idem_postgres, restate),
            }
        })
        .collect()
}

fn ops(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ops| format!("{ops:.0}"))
}

fn times(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}×"))
}

fn mib(value: Option<f64>) -> String {
    value.map_or_else(|| "?".to_owned(), |mib| format!("{mib:.0} MiB"))
}

/// The ratio table: one line per step and concurrency.
pub fn comparison_table(comparison: &[Comparison]) -> String {
    let mut table = String::from(
        "| step | concurrency | client | Restate ops/s | idem sqlite ops/s | idem/Restate (sqlite) | idem postgres ops/s | idem/Restate (postgres) |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
    );
    for line in comparison {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            line.step.label(),
            line.concurrency,
            line.client.label(),
            ops(line.restate),
            ops(line.idem_sqlite),
            times(line.sqlite_ratio),
            ops(line.idem_postgres),
            times(line.postgres_ratio),
        );
    }
    table
}

/// Every measured row with its latencies and errors.
pub fn rows_table(rows: &[PeerRow]) -> String {
    let mut table = String::from(
        "| system | step | client | concurrency | ops/s | p50 ms | p99 ms | errors |\n\
         |---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {} |",
            row.system.label(),
            row.step.label(),
            row.client.label(),
            row.concurrency,
            row.throughput,
            row.p50_ms,
            row.p99_ms,
            row.errors,
        );
    }
    table
}

fn facts(restate: &RestateFacts) -> String {
    format!(
        "Restate {} (npm `@restatedev/restate-server`, default configuration: durable log, \
         24 partitions), handler on `@restatedev/restate-sdk` {} under Node {}. \
         Ready {} ms after spawn; first call {} ms. restate-server RSS: {} at rest, {} after \
         its runs; handler RSS {}; data folder {} on disk after its runs.\n",
        restate.server_version,
        restate.sdk_version,
        restate.node_version,
        restate.ready_after_ms,
        restate.first_call_ms,
        mib(restate.server_rss_mib_at_rest),
        mib(restate.server_rss_mib_after),
        mib(restate.handler_rss_mib_after),
        mib(restate.data_mib_after),
    )
}

const WHAT_A_STEP_IS: &str = "A step: for a new key, idem's claim (`POST /v1/operations`, \
201) then complete (200), two HTTP requests; Restate's one ingress call with a fresh \
`idempotency-key`, which runs the trivial handler and stores its result. For a repeated key, \
one request answered from the stored outcome (idem: 200 replayed; Restate: 200 with \
`idempotency-expires`), cycling over 64 completed keys. Same machine, same run; Restate ran first and was stopped \
before idem started. Each step is measured by two clients: the bench's own (hyper's \
HTTP/1.1 connections, keep-alive, in the bench's process, which also hosts idem) and wrk (a process of its own, \
`bench/src/wrk/load.lua`), with one connection per concurrent caller. In wrk's view a new \
key of idem's counts when its completion is answered 200, the claim's id and lease read from \
its 201; latencies are per request there (half a step for idem's new keys), per step in \
the bench client's.\n";

/// The whole Markdown file.
pub fn markdown(report: &PeerReport) -> String {
    let mut text = format!(
        "# idem bench --peers: idem next to Restate\n\n{} · {} s per scenario · medians of {} runs · {} cores · loopback\n\n",
        report.generated_at, report.seconds_per_scenario, report.runs, report.cores
    );
    text.push_str(&facts(&report.restate));
    text.push('\n');
    text.push_str(WHAT_A_STEP_IS);
    text.push('\n');
    text.push_str(&comparison_table(&report.comparison));
    text.push('\n');
    text.push_str(&rows_table(&report.rows));
    text.push_str("\n## Targets (issue #33), in each client's view\n\n");
    text.push_str(&targets::markdown(&report.targets));
    for skipped in &report.skipped {
        let _ = write!(text, "\nSKIPPED: {skipped}\n");
    }
    text
}

#[cfg(test)]
mod tests;
