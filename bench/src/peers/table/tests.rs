//! The peer tables, ratios and files from made-up rows.

use super::*;

fn row(system: System, step: Step, concurrency: usize, throughput: f64) -> PeerRow {
    PeerRow {
        system,
        step,
        client: Client::InProcess,
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

    let row = PeerRow::from_runs(System::Restate, Step::New, Client::Wrk, 64, &runs);

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
    assert!(table.ends_with("| repeated key | 16 | bench client | - | 900 | - | - | - |\n"));
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
        targets: super::super::targets::targets(&compare(&rows)),
        rows,
        skipped: vec!["PostgreSQL rows: unreachable".into()],
    };
    let text = markdown(&report);
    assert!(text.starts_with("# idem bench --peers"));
    assert!(text.contains(" · medians of 3 runs · "));
    assert!(text.contains("Restate 1.7.12 (npm"));
    assert!(text.contains("270 MiB at rest, ? after"));
    assert!(text.contains("| new key | 16 | bench client | 1400 | 2800 | 2.00× | - | - |\n"));
    assert!(text.contains("| Restate | new key | bench client | 16 | 1400 | 0.50 | 4.25 | 0 |\n"));
    assert!(text.contains("| SQLite new keys at 64 ≥ 5× Restate new keys (wrk) | not measured |"));
    assert!(text.ends_with("SKIPPED: PostgreSQL rows: unreachable\n"));
    assert!(text.contains("## Targets (issue #33), in each client's view"));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["rows"][1]["system"], "idem_sqlite");
    assert_eq!(json["comparison"][0]["sqlite_ratio"], 2.0);
    assert_eq!(json["restate"]["server_version"], "1.7.12");
}

#[test]
fn the_two_clients_views_of_a_step_are_compared_apart_and_listed_together() {
    let rows = vec![
        PeerRow {
            client: Client::Wrk,
            ..row(System::IdemSqlite, Step::New, 64, 4000.0)
        },
        row(System::IdemSqlite, Step::New, 64, 6000.0),
        PeerRow {
            client: Client::Wrk,
            ..row(System::Restate, Step::New, 64, 2000.0)
        },
        row(System::Restate, Step::New, 64, 1000.0),
        row(System::Restate, Step::New, 16, 900.0),
    ];
    let summary: Vec<_> = compare(&rows)
        .iter()
        .map(|c| (c.concurrency, c.client, c.sqlite_ratio))
        .collect();
    assert_eq!(
        summary,
        [
            (16, Client::InProcess, None),
            (64, Client::InProcess, Some(6.0)),
            (64, Client::Wrk, Some(2.0)),
        ]
    );
    let json = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(json["client"], "wrk");
}
