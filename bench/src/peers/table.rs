//! The peer comparison's results: one row per (system, step, concurrency), the ratio
//! idem/Restate per step and concurrency, and the file as Markdown and JSON. Pure functions,
//! tested without running anything.

use serde::Serialize;
use std::fmt::Write as _;

use super::restate::RestateFacts;
use crate::report::RunResult;

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

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerRow {
    pub system: System,
    pub step: Step,
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
    pub fn from_runs(system: System, step: Step, concurrency: usize, runs: &[RunResult]) -> Self {
        let medians = RunResult::medians(runs);
        PeerRow {
            system,
            step,
            concurrency,
            throughput: medians.throughput,
            p50_ms: medians.p50_ms,
            p99_ms: medians.p99_ms,
            errors: medians.errors,
            runs: runs.iter().map(|run| run.throughput).collect(),
        }
    }
}

/// idem next to Restate for one step kind at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub step: Step,
    pub concurrency: usize,
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

/// One comparison per (step, concurrency) measured on any system, steps in table order and
/// concurrencies ascending.
pub fn compare(rows: &[PeerRow]) -> Vec<Comparison> {
    let mut keys: Vec<(Step, usize)> = Vec::new();
    for step in Step::ALL {
        let mut concurrencies: Vec<usize> = rows
            .iter()
            .filter(|row| row.step == step)
            .map(|row| row.concurrency)
            .collect();
        concurrencies.sort_unstable();
        concurrencies.dedup();
        keys.extend(concurrencies.into_iter().map(|c| (step, c)));
    }
    keys.into_iter()
        .map(|(step, concurrency)| {
            let throughput = |system| {
                rows.iter()
                    .find(|r| r.system == system && r.step == step && r.concurrency == concurrency)
                    .map(|r| r.throughput)
            };
            let restate = throughput(System::Restate);
            let idem_sqlite = throughput(System::IdemSqlite);
            let idem_postgres = throughput(System::IdemPostgres);
            Comparison {
                step,
                concurrency,
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
        "| step | concurrency | Restate ops/s | idem sqlite ops/s | idem/Restate (sqlite) | idem postgres ops/s | idem/Restate (postgres) |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for line in comparison {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} |",
            line.step.label(),
            line.concurrency,
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
        "| system | step | concurrency | ops/s | p50 ms | p99 ms | errors |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {} |",
            row.system.label(),
            row.step.label(),
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
`idempotency-expires`), cycling over 64 completed keys. Same HTTP client (reqwest, \
keep-alive), same machine, same run; Restate ran first and was stopped before idem started.\n";

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
    for skipped in &report.skipped {
        let _ = write!(text, "\nSKIPPED: {skipped}\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: System, step: Step, concurrency: usize, throughput: f64) -> PeerRow {
        PeerRow {
            system,
            step,
            concurrency,
            throughput,
            p50_ms: 0.5,
            p99_ms: 4.25,
            errors: 0,
            runs: vec![throughput],
        }
    }

    #[test]
    fn a_peer_row_reports_the_medians_of_its_runs_and_keeps_each_rate() {
        let run = |throughput, p99_ms, errors| RunResult {
            throughput,
            p50_ms: p99_ms / 4.0,
            p99_ms,
            errors,
        };
        let runs = [
            run(900.0, 8.0, 1),
            run(1500.0, 2.0, 0),
            run(1200.0, 40.0, 2),
        ];

        let row = PeerRow::from_runs(System::Restate, Step::New, 64, &runs);

        assert_eq!(row.throughput, 1200.0);
        assert_eq!(row.p99_ms, 8.0, "each figure's own median");
        assert_eq!(row.p50_ms, 2.0);
        assert_eq!(row.errors, 3, "the errors of every run");
        assert_eq!(row.runs, [900.0, 1500.0, 1200.0], "in run order");
    }

    #[test]
    fn a_ratio_needs_both_sides_and_a_restate_above_zero() {
        assert_eq!(ratio(Some(3000.0), Some(1500.0)), Some(2.0));
        assert_eq!(ratio(Some(3000.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1500.0)), None);
        assert_eq!(ratio(Some(3000.0), None), None);
    }

    #[test]
    fn each_step_and_concurrency_compares_idem_with_restate_of_the_same() {
        let rows = vec![
            row(System::Restate, Step::New, 64, 1000.0),
            row(System::Restate, Step::New, 1, 100.0),
            row(System::Restate, Step::Replay, 64, 10_000.0),
            row(System::IdemSqlite, Step::New, 1, 50.0),
            row(System::IdemSqlite, Step::New, 64, 5000.0),
            row(System::IdemSqlite, Step::Replay, 64, 25_000.0),
            row(System::IdemPostgres, Step::New, 64, 700.0),
        ];
        let comparison = compare(&rows);
        let summary: Vec<_> = comparison
            .iter()
            .map(|c| (c.step, c.concurrency, c.sqlite_ratio, c.postgres_ratio))
            .collect();
        assert_eq!(
            summary,
            [
                (Step::New, 1, Some(0.5), None),
                (Step::New, 64, Some(5.0), Some(0.7)),
                (Step::Replay, 64, Some(2.5), None),
            ]
        );
        assert_eq!(comparison[1].idem_postgres, Some(700.0));
    }

    #[test]
    fn rows_measured_only_on_idem_still_get_a_line_without_a_ratio() {
        let rows = vec![row(System::IdemSqlite, Step::Replay, 16, 900.0)];
        let comparison = compare(&rows);
        assert_eq!(comparison.len(), 1);
        assert_eq!(comparison[0].restate, None);
        assert_eq!(comparison[0].sqlite_ratio, None);
        let table = comparison_table(&comparison);
        assert!(table.ends_with("| repeated key | 16 | - | 900 | - | - | - |\n"));
    }

    #[test]
    fn the_markdown_has_the_facts_both_tables_and_what_was_skipped() {
        let rows = vec![
            row(System::Restate, Step::New, 16, 1400.0),
            row(System::IdemSqlite, Step::New, 16, 2800.0),
        ];
        let report = PeerReport {
            generated_at: "2026-12-01T20:00:00Z".into(),
            seconds_per_scenario: 3,
            runs: 3,
            cores: 2,
            restate: RestateFacts {
                server_version: "1.7.12".into(),
                server_rss_mib_at_rest: Some(269.5),
                ..RestateFacts::default()
            },
            comparison: compare(&rows),
            rows,
            skipped: vec!["PostgreSQL rows: unreachable".into()],
        };
        let text = markdown(&report);
        assert!(text.starts_with("# idem bench --peers"));
        assert!(text.contains(" · medians of 3 runs · "));
        assert!(text.contains("Restate 1.7.12 (npm"));
        assert!(text.contains("270 MiB at rest, ? after"));
        assert!(text.contains("| new key | 16 | 1400 | 2800 | 2.00× | - | - |\n"));
        assert!(text.contains("| Restate | new key | 16 | 1400 | 0.50 | 4.25 | 0 |\n"));
        assert!(text.ends_with("SKIPPED: PostgreSQL rows: unreachable\n"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][1]["system"], "idem_sqlite");
        assert_eq!(json["comparison"][0]["sqlite_ratio"], 2.0);
        assert_eq!(json["restate"]["server_version"], "1.7.12");
    }
}
