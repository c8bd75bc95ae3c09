//! Verdicts of the targets, from rows made by hand.

use super::*;

fn row(scenario: Scenario, database: Option<Engine>, concurrency: usize, ops: f64) -> Row {
    Row {
        scenario,
        database,
        concurrency,
        throughput: ops,
        p50_ms: 4.0,
        p99_ms: 8.0,
        errors: 0,
        ratio: None,
        runs: vec![ops],
    }
}

fn find<'a>(targets: &'a [TargetResult], start: &str) -> &'a TargetResult {
    targets
        .iter()
        .find(|t| t.target.starts_with(start))
        .unwrap_or_else(|| panic!("no target starting with {start:?}"))
}

#[test]
fn a_target_is_met_not_met_or_not_measured() {
    let sqlite = Some(Engine::Sqlite);
    let rows = vec![
        row(Scenario::IdemNew, sqlite, 64, 7_500.0),
        row(Scenario::IdemReplay, sqlite, 64, 20_000.0),
        row(Scenario::AxumHello, None, 64, 80_000.0),
    ];
    let targets = targets(&rows, &[], &PeerRates::default());

    let restate = find(&targets, "SQLite new claim+complete at 64 ≥ 5× Restate");
    assert_eq!(restate.verdict, Verdict::Met);
    assert_eq!(restate.ratio, Some(7_500.0 / 1_400.0));
    assert_eq!(restate.reference.source, Source::Issue);

    let rusqlite = find(&targets, "SQLite new claim+complete at 64 ≥ 2× sequential");
    assert_eq!(rusqlite.verdict, Verdict::Met);

    let replay = find(&targets, "replay at 64 (sqlite) ≥ 2× Restate");
    assert_eq!(replay.verdict, Verdict::NotMet, "20 000 < 2 × 15 000");

    let axum = find(&targets, "replay at 64 (sqlite) ≥ 35 % of axum");
    assert_eq!(axum.ratio, Some(0.25));
    assert_eq!(axum.verdict, Verdict::NotMet);
    assert_eq!(axum.reference.source, Source::ThisRun);

    let pgbench = find(&targets, "PostgreSQL new claim+complete at 32");
    assert_eq!(pgbench.verdict, Verdict::NotMeasured);
    assert_eq!(
        find(&targets, "hydrate bundle").verdict,
        Verdict::NotMeasured
    );
}

#[test]
fn the_sequential_floor_measured_in_the_run_replaces_the_issues() {
    let sqlite = Some(Engine::Sqlite);
    let new_at_64 = row(Scenario::IdemNew, sqlite, 64, 5_000.0);
    let without = targets(std::slice::from_ref(&new_at_64), &[], &PeerRates::default());
    let issue = find(&without, "SQLite new claim+complete at 64 ≥ 2× sequential");
    assert_eq!(issue.reference.source, Source::Issue);
    assert_eq!(issue.verdict, Verdict::NotMet, "5 000 < 2 × 2 900");

    let floor = row(Scenario::SequentialSqliteClaimComplete, sqlite, 1, 2_000.0);
    let with = targets(&[new_at_64, floor], &[], &PeerRates::default());
    let measured = find(&with, "SQLite new claim+complete at 64 ≥ 2× sequential");
    assert_eq!(measured.reference.source, Source::ThisRun);
    assert_eq!(measured.ratio, Some(2.5));
    assert_eq!(measured.verdict, Verdict::Met);
    assert!(markdown(&with).contains("(the issue measured 2900/s): 2000/s"));
}

#[test]
fn peers_measured_in_the_run_replace_the_issues_rates() {
    let rows = vec![row(Scenario::IdemNew, Some(Engine::Sqlite), 64, 7_500.0)];
    let peers = PeerRates {
        restate_new_keys: Some(2_000.0),
        restate_replays: None,
    };
    let targets = targets(&rows, &[], &peers);
    let restate = find(&targets, "SQLite new claim+complete at 64 ≥ 5× Restate");
    assert_eq!(restate.reference.source, Source::ThisRun);
    assert_eq!(restate.verdict, Verdict::NotMet, "7 500 < 5 × 2 000");
    let text = markdown(&targets);
    assert!(text.contains("| Restate new keys at 64: 2000/s |"));
    assert!(text.contains("Restate replays at 64: 15000/s (issue's reference, not this run)"));
}

#[test]
fn limits_are_met_at_or_under_them() {
    let resources = vec![
        Resource {
            name: BUNDLE.into(),
            database: None,
            value: 400.0,
            unit: "KB",
        },
        Resource {
            name: RSS_AFTER.into(),
            database: Some(Engine::Postgres),
            value: 151.0,
            unit: "MB",
        },
    ];
    let targets = targets(&[], &resources, &PeerRates::default());
    assert_eq!(find(&targets, "hydrate bundle").verdict, Verdict::Met);
    let rss = find(&targets, "server RSS after the dashboard run (postgres)");
    assert_eq!(rss.verdict, Verdict::NotMet);
    let line = markdown(std::slice::from_ref(rss));
    assert!(line.ends_with("| 151.0 MB | 150.0 MB (the issue's limit) | 1.01 | ≤ 1 | not met |\n"));
}

#[test]
fn a_dashboard_request_that_failed_is_not_measured_rather_than_fast() {
    let request = Scenario::Dashboard(DashboardRequest::ApiDetail);
    let mut failed = row(request, Some(Engine::Sqlite), 1, 0.0);
    failed.p50_ms = f64::NAN;
    failed.errors = 50;
    let fast = row(request, Some(Engine::Postgres), 1, 250.0);
    let targets = targets(&[failed, fast], &[], &PeerRates::default());
    let sqlite = find(&targets, "GET /v1/operations/{id} (sqlite)");
    assert_eq!(sqlite.verdict, Verdict::NotMeasured);
    let postgres = find(&targets, "GET /v1/operations/{id} (postgres)");
    assert_eq!(
        (postgres.measured, postgres.verdict),
        (Some(4.0), Verdict::Met)
    );
}

#[test]
fn latency_is_read_from_the_open_loop_at_half_of_the_peak_when_it_ran() {
    let sqlite = Some(Engine::Sqlite);
    let mut half = row(Scenario::IdemNew, sqlite, 16, 600.0);
    half.p99_ms = 12.0;
    let peak = row(Scenario::IdemNew, sqlite, 64, 1_000.0);
    let mut steps = row(Scenario::IdemNewHalfPeak, sqlite, 256, 499.0);
    steps.p99_ms = 11.0;
    let mut claims = row(Scenario::IdemClaimHalfPeak, sqlite, 256, 499.0);
    claims.p99_ms = 6.0;
    let targets = targets(&[peak, half, steps, claims], &[], &PeerRates::default());
    let latency = find(&targets, "p99 claim ≤ 10 ms at half of peak (sqlite");
    assert_eq!(latency.measured, Some(6.0));
    assert_eq!(latency.verdict, Verdict::Met);
    assert!(latency.target.contains("open loop, 499/s of 1000/s"));
}

#[test]
fn without_an_open_loop_latency_is_read_where_throughput_first_reaches_half_of_the_peak() {
    let sqlite = Some(Engine::Sqlite);
    let mut slow = row(Scenario::IdemNew, sqlite, 1, 300.0);
    slow.p99_ms = 2.0;
    let mut half = row(Scenario::IdemNew, sqlite, 16, 600.0);
    half.p99_ms = 12.0;
    let peak = row(Scenario::IdemNew, sqlite, 64, 1_000.0);
    let targets = targets(&[peak, slow, half], &[], &PeerRates::default());
    let latency = find(
        &targets,
        "p99 claim+complete ≤ 10 ms at half of peak (sqlite",
    );
    assert_eq!(latency.measured, Some(12.0));
    assert_eq!(latency.verdict, Verdict::NotMet);
    assert!(latency.target.contains("concurrency 16"));
}

#[test]
fn postgres_claims_at_half_of_peak_are_held_to_ten_ms_and_to_issue_33s_twenty_five() {
    let postgres = Some(Engine::Postgres);
    let peak = row(Scenario::IdemNew, postgres, 64, 2_000.0);
    let mut claims = row(Scenario::IdemClaimHalfPeak, postgres, 256, 1_000.0);
    claims.p99_ms = 20.0;
    let targets = targets(&[peak, claims], &[], &PeerRates::default());
    let ten = find(&targets, "p99 claim ≤ 10 ms at half of peak (postgres");
    assert_eq!(ten.verdict, Verdict::NotMet);
    let twenty_five = find(&targets, "p99 claim ≤ 25 ms at half of peak (postgres");
    assert_eq!(twenty_five.measured, Some(20.0));
    assert_eq!(twenty_five.verdict, Verdict::Met);
    assert_eq!(twenty_five.reference.what, "issue #33's limit");
}

#[test]
fn postgres_group_commit_is_read_against_the_unannounced_pgbench_floor() {
    let postgres = Some(Engine::Postgres);
    let new_at_64 = row(Scenario::IdemNew, postgres, 64, 3_000.0);
    let announced = row(Scenario::PgbenchClaimComplete, postgres, 32, 1_000.0);
    let without = targets(
        &[new_at_64.clone(), announced.clone()],
        &[],
        &PeerRates::default(),
    );
    let target = "PostgreSQL new claim+complete at 64 ≥ 2× pgbench, changes not announced";
    assert_eq!(find(&without, target).verdict, Verdict::NotMeasured);

    let unannounced = row(
        Scenario::PgbenchUnannouncedClaimComplete,
        postgres,
        32,
        2_000.0,
    );
    let with = targets(
        &[new_at_64, announced, unannounced],
        &[],
        &PeerRates::default(),
    );
    let measured = find(&with, target);
    assert_eq!(measured.ratio, Some(1.5));
    assert_eq!(measured.verdict, Verdict::NotMet, "3 000 < 2 × 2 000");
}

#[test]
fn two_processes_are_read_against_one_process_started_the_same_way() {
    let postgres = Some(Engine::Postgres);
    let target = "two idem processes on one PostgreSQL database";
    let in_process = row(Scenario::IdemNew, postgres, 64, 1_000.0);
    let two = row(Scenario::IdemNewTwoProcesses, postgres, 64, 1_700.0);
    let alone = targets(
        &[in_process.clone(), two.clone()],
        &[],
        &PeerRates::default(),
    );
    assert_eq!(
        find(&alone, target).verdict,
        Verdict::NotMeasured,
        "the in-process row is not the reference"
    );

    let one = row(Scenario::IdemNewOneProcess, postgres, 64, 1_000.0);
    let met = targets(&[one.clone(), two], &[], &PeerRates::default());
    assert_eq!(find(&met, target).ratio, Some(1.7));
    assert_eq!(find(&met, target).verdict, Verdict::Met);

    let short = row(Scenario::IdemNewTwoProcesses, postgres, 64, 1_500.0);
    let not_met = targets(&[one, short], &[], &PeerRates::default());
    assert_eq!(find(&not_met, target).verdict, Verdict::NotMet, "1.5 < 1.6");
}
