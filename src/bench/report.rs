//! The results: one row per (scenario, database, concurrency), ratios to the floors, and the
//! table as Markdown and JSON. Pure functions, so they are tested without running a bench.

use serde::Serialize;
use std::fmt::Write as _;

use super::scenario::{Engine, Scenario};

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
}

/// Everything one run produced.
#[derive(Debug, Serialize)]
pub struct Report {
    /// When the run ended (RFC 3339).
    pub generated_at: String,
    pub seconds_per_scenario: u64,
    pub cores: usize,
    pub rows: Vec<Row>,
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
            (_, None) => "1 (is a floor)".to_owned(),
        };
        let _ = writeln!(
            table,
            "| {} | {database} | {} | {:.0} | {:.2} | {:.2} | {} | {ratio} |",
            row.scenario.label(),
            row.concurrency,
            row.throughput,
            row.p50_ms,
            row.p99_ms,
            row.errors,
        );
    }
    table
}

/// The whole Markdown file: what was run, the table, and what was skipped.
pub fn markdown(report: &Report) -> String {
    let mut text = format!(
        "# idem bench\n\n{} · {} s per scenario · {} cores · loopback, one process\n\n",
        report.generated_at, report.seconds_per_scenario, report.cores
    );
    text.push_str(&markdown_table(&report.rows));
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
            cores: 2,
            rows: vec![row(Scenario::AxumHello, None, 1, 9.0)],
            skipped: vec!["postgres: unreachable".into()],
        };
        let text = markdown(&report);
        assert!(text.starts_with("# idem bench\n\n2026-12-01T19:00:00Z · 3 s per scenario"));
        assert!(text.contains("| floor: axum hello | - | 1 | 9 |"));
        assert!(text.ends_with("SKIPPED: postgres: unreachable\n"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][0]["scenario"], "axum_hello");
        assert_eq!(json["rows"][0]["database"], serde_json::Value::Null);
    }
}
