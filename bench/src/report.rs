//! The results: one row per (scenario, database, concurrency), ratios to the floors, and the
//! table as Markdown and JSON. Pure functions, so they are tested without running a bench.

use serde::Serialize;
use std::fmt::Write as _;

use super::scenario::{Engine, Scenario};
use super::targets::{self, TargetResult};

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub scenario: Scenario,
    /// `None` for the HTTP floor, which uses no database.
    pub database: Option<Engine>,
    pub concurrency: usize,
    /// Successful steps per second.
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
    /// Throughput divided by the floor's at the same concurrency (and database).
    pub ratio: Option<f64>,
    /// Each run's throughput, in run order; `throughput` is their median.
    pub runs: Vec<f64>,
}

/// What one run of a row measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunResult {
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

impl RunResult {
    /// What several runs of one row measured: the median of each figure (so one disturbed
    /// run does not move it) and the errors of all of them.
    pub fn medians(runs: &[RunResult]) -> RunResult {
        let figure =
            |pick: fn(&RunResult) -> f64| median(&runs.iter().map(pick).collect::<Vec<_>>());
        RunResult {
            throughput: figure(|run| run.throughput),
            p50_ms: figure(|run| run.p50_ms),
            p99_ms: figure(|run| run.p99_ms),
            errors: runs.iter().map(|run| run.errors).sum(),
        }
    }
}

impl Row {
    /// A row from its runs: their medians (`RunResult::medians`), and every run's
    /// throughput kept.
    pub fn from_runs(
        scenario: Scenario,
        database: Option<Engine>,
        concurrency: usize,
        runs: &[RunResult],
    ) -> Row {
        let medians = RunResult::medians(runs);
        Row {
            scenario,
            database,
            concurrency,
            throughput: medians.throughput,
            p50_ms: medians.p50_ms,
            p99_ms: medians.p99_ms,
            errors: medians.errors,
            ratio: None,
            runs: runs.iter().map(|run| run.throughput).collect(),
        }
    }
}

/// The median: the middle value, or the mean of the two middle values of an even count;
/// 0 for no values.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[middle],
        _ => (sorted[middle - 1] + sorted[middle]) / 2.0,
    }
}

/// A size measured once: the server's memory, the bundle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    pub name: String,
    /// The database the server ran on, if any.
    pub database: Option<Engine>,
    pub value: f64,
    pub unit: &'static str,
}

/// Everything one run produced.
#[derive(Debug, Serialize)]
pub struct Report {
    /// When the run ended (RFC 3339).
    pub generated_at: String,
    pub seconds_per_scenario: u64,
    /// Runs per row; a row's figures are the medians of its runs.
    pub runs: usize,
    pub cores: usize,
    pub rows: Vec<Row>,
    /// Sizes measured once: memory, bundle.
    pub resources: Vec<Resource>,
    /// Issue #7's targets against this run.
    pub targets: Vec<TargetResult>,
    /// What did not run, and why.
    pub skipped: Vec<String>,
}

/// Sets each row's ratio to its floor, found at the same concurrency and, for a store floor,
/// the same database.
pub fn fill_ratios(rows: &mut [Row]) {
    let ratios: Vec<Option<f64>> = rows.iter().map(|row| ratio(row, rows)).collect();
    for (row, ratio) in rows.iter_mut().zip(ratios) {
        row.ratio = ratio;
    }
}

fn ratio(row: &Row, rows: &[Row]) -> Option<f64> {
    let floor = row.scenario.floor()?;
    let database = match floor {
        Scenario::AxumHello => None,
        _ => row.database,
    };
    let base = rows.iter().find(|candidate| {
        candidate.scenario == floor
            && candidate.database == database
            && candidate.concurrency == row.concurrency
    })?;
    (base.throughput > 0.0).then(|| row.throughput / base.throughput)
}

/// The table in Markdown, one line per row.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut table = String::from(
        "| scenario | database | concurrency | ops/s | p50 ms | p99 ms | errors | ratio to floor |\n\
         |---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for row in rows {
        let database = row.database.map_or("-", Engine::as_str);
        let ratio = match (row.ratio, row.scenario.floor()) {
            (Some(ratio), Some(floor)) => format!("{ratio:.2}× {}", floor.label()),
            (None, Some(_)) => "n/a (no floor row)".to_owned(),
            (_, None) if row.scenario.is_floor() => "1 (is a floor)".to_owned(),
            (_, None) => "-".to_owned(),
        };
        let _ = writeln!(
            table,
            "| {} | {database} | {} | {:.0} | {} | {} | {} | {ratio} |",
            row.scenario.label(),
            row.concurrency,
            row.throughput,
            milliseconds(row.p50_ms),
            milliseconds(row.p99_ms),
            row.errors,
        );
    }
    table
}

/// A latency with two decimals, or `-` when it was not measured (NaN, as pgbench prints no
/// percentiles; NaN is `null` in the JSON).
fn milliseconds(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.2}")
    } else {
        "-".to_owned()
    }
}

/// The whole Markdown file: what was run, the table, and what was skipped.
pub fn markdown(report: &Report) -> String {
    let mut text = format!(
        "# idem bench\n\n{} · {} s per scenario · medians of {} runs · {} cores · loopback\n\n",
        report.generated_at, report.seconds_per_scenario, report.runs, report.cores
    );
    text.push_str(&markdown_table(&report.rows));
    if !report.resources.is_empty() {
        text.push_str("\n## Resources\n\n| resource | database | value |\n|---|---|---:|\n");
        for resource in &report.resources {
            let database = resource.database.map_or("-", Engine::as_str);
            let _ = writeln!(
                text,
                "| {} | {database} | {:.1} {} |",
                resource.name, resource.value, resource.unit
            );
        }
    }
    if !report.targets.is_empty() {
        text.push_str("\n## Targets (issue #7)\n\n");
        text.push_str(&targets::markdown(&report.targets));
    }
    for skipped in &report.skipped {
        let _ = write!(text, "\nSKIPPED: {skipped}\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scenario: Scenario, database: Option<Engine>, concurrency: usize, ops: f64) -> Row {
        Row {
            scenario,
            database,
            concurrency,
            throughput: ops,
            p50_ms: 1.5,
            p99_ms: 12.25,
            errors: 0,
            ratio: None,
            runs: vec![ops],
        }
    }

    #[test]
    fn ratios_divide_by_the_floor_of_the_same_concurrency_and_database() {
        let sqlite = Some(Engine::Sqlite);
        let postgres = Some(Engine::Postgres);
        let mut rows = vec![
            row(Scenario::StoreClaimComplete, sqlite, 16, 1000.0),
            row(Scenario::StoreClaimComplete, postgres, 16, 4000.0),
            row(Scenario::StoreClaimComplete, sqlite, 64, 2000.0),
            row(Scenario::AxumHello, None, 16, 50_000.0),
            row(Scenario::IdemNew, sqlite, 16, 500.0),
            row(Scenario::IdemNew, postgres, 16, 1000.0),
            row(Scenario::IdemReplay, sqlite, 16, 10_000.0),
            row(Scenario::IdemMixed, postgres, 64, 10.0),
        ];
        fill_ratios(&mut rows);
        let ratios: Vec<Option<f64>> = rows.iter().map(|r| r.ratio).collect();
        assert_eq!(
            ratios,
            [
                None,
                None,
                None,
                None,
                Some(0.5),
                Some(0.25),
                Some(0.2),
                None
            ]
        );
    }

    #[test]
    fn a_zero_floor_gives_no_ratio() {
        let mut rows = vec![
            row(Scenario::AxumHello, None, 1, 0.0),
            row(Scenario::IdemReplay, Some(Engine::Sqlite), 1, 10.0),
        ];
        fill_ratios(&mut rows);
        assert_eq!(rows[1].ratio, None);
    }

    #[test]
    fn the_table_has_a_header_and_one_line_per_row() {
        let mut rows = vec![
            row(
                Scenario::StoreClaimComplete,
                Some(Engine::Sqlite),
                16,
                1000.4,
            ),
            row(Scenario::IdemNew, Some(Engine::Sqlite), 16, 500.0),
            row(Scenario::IdemReplay, Some(Engine::Sqlite), 16, 700.0),
        ];
        fill_ratios(&mut rows);
        let table = markdown_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("| scenario | database | concurrency | ops/s"));
        assert_eq!(
            lines[2],
            "| floor: store claim+complete | sqlite | 16 | 1000 | 1.50 | 12.25 | 0 | 1 (is a floor) |"
        );
        assert_eq!(
            lines[3],
            "| idem: new claim+complete | sqlite | 16 | 500 | 1.50 | 12.25 | 0 | 0.50× floor: store claim+complete |"
        );
        assert!(lines[4].ends_with("| n/a (no floor row) |"));
    }

    #[test]
    fn skipped_parts_are_said_in_the_file() {
        let report = Report {
            generated_at: "2026-12-01T19:00:00Z".into(),
            seconds_per_scenario: 3,
            runs: 3,
            cores: 2,
            rows: vec![row(Scenario::AxumHello, None, 1, 9.0)],
            resources: Vec::new(),
            targets: Vec::new(),
            skipped: vec!["postgres: unreachable".into()],
        };
        let text = markdown(&report);
        assert!(text.starts_with(
            "# idem bench\n\n2026-12-01T19:00:00Z · 3 s per scenario · medians of 3 runs"
        ));
        assert!(text.contains("| floor: axum hello | - | 1 | 9 |"));
        assert!(text.ends_with("SKIPPED: postgres: unreachable\n"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][0]["scenario"], "axum_hello");
        assert_eq!(json["rows"][0]["database"], serde_json::Value::Null);
        assert_eq!(json["rows"][0]["runs"], serde_json::json!([9.0]));
    }

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_two_middle_ones() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[9.0, 1.0, 5.0]), 5.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn a_row_of_runs_reports_each_figures_median_and_keeps_every_throughput() {
        let run = |throughput, p50_ms, p99_ms, errors| RunResult {
            throughput,
            p50_ms,
            p99_ms,
            errors,
        };
        let runs = [
            run(1000.0, 2.0, 30.0, 0),
            run(100.0, 9.0, 90.0, 2),
            run(900.0, 3.0, 20.0, 1),
        ];
        let row = Row::from_runs(Scenario::IdemNew, Some(Engine::Sqlite), 32, &runs);
        assert_eq!(row.throughput, 900.0);
        assert_eq!(row.p50_ms, 3.0);
        assert_eq!(
            row.p99_ms, 30.0,
            "each figure's own median, not the median run's"
        );
        assert_eq!(row.errors, 3);
        assert_eq!(row.runs, [1000.0, 100.0, 900.0]);
    }
}
