//! wrk's arguments and the script's summary, without running wrk (bench/src/tests.rs runs it).

use super::*;

const SUMMARY: &str = r#"IDEM_BENCH {"duration_us":2004113,"requests":18422,"ok":9200,"unexpected":3,"first_unexpected":"409 operation_in_progress","connect_errors":0,"read_errors":1,"write_errors":0,"timeouts":2,"p50_us":3120,"p99_us":11800}"#;

#[test]
fn the_summary_is_the_line_after_the_marker_among_wrks_own_output() {
    let stdout = format!(
        "Running 2s test @ http://127.0.0.1:4000\n  2 threads and 64 connections\n\
         {SUMMARY}\nRequests/sec:   9192.40\nTransfer/sec:      3.10MB\n"
    );
    let summary = Summary::parse(&stdout).expect("a summary");
    assert_eq!(summary.duration_us, 2_004_113);
    assert_eq!(summary.requests, 18_422);
    assert_eq!(summary.ok, 9_200);
    assert_eq!(summary.first_unexpected, "409 operation_in_progress");
    assert_eq!(
        summary.errors(),
        3 + 1 + 2,
        "unexpected answers and failed requests"
    );
}

#[test]
fn output_without_a_summary_or_with_a_broken_one_is_an_error() {
    let missing = Summary::parse("Running 2s test\nRequests/sec: 10\n").unwrap_err();
    assert!(missing.to_string().contains("no summary line"), "{missing}");
    let broken = Summary::parse("IDEM_BENCH {\"duration_us\":12,\"ok\":}\n").unwrap_err();
    assert!(
        broken.to_string().contains("wrk's summary line"),
        "{broken}"
    );
}

#[test]
fn a_run_counts_the_expected_steps_per_second_and_latencies_in_milliseconds() {
    let summary = Summary::parse(SUMMARY).unwrap();
    let result = summary.run_result();
    assert!((result.throughput - 9_200.0 / 2.004113).abs() < 1e-6);
    assert_eq!(result.p50_ms, 3.12);
    assert_eq!(result.p99_ms, 11.8);
    assert_eq!(result.errors, 6);
    let idle = Summary {
        duration_us: 0,
        ..summary
    };
    assert_eq!(idle.run_result().throughput, 0.0);
}

#[test]
fn threads_divide_the_connections_and_never_outnumber_the_cores() {
    let cases = [
        (1, 2, 1),
        (16, 2, 2),
        (64, 2, 2),
        (3, 2, 1),
        (64, 8, 8),
        (36, 8, 6),
        (7, 0, 1),
    ];
    for (connections, cores, threads) in cases {
        assert_eq!(
            threads_for(connections, cores),
            threads,
            "{connections} connections on {cores} cores"
        );
    }
}

#[test]
fn the_script_gets_the_load_the_run_prefix_the_key_and_the_completed_keys() {
    let target = Target {
        base: "http://127.0.0.1:4000".into(),
        load: Load::IdemReplay,
        prefix: "abc".into(),
        authorization: Some("Bearer idem_k".into()),
        completed_keys: 64,
    };
    let args = arguments(
        &target,
        Path::new("/tmp/load.lua"),
        64,
        2,
        Duration::from_secs(3),
    );
    assert_eq!(
        args,
        [
            "--threads=2",
            "--connections=64",
            "--duration=3s",
            "--timeout=10s",
            "--script=/tmp/load.lua",
            "http://127.0.0.1:4000",
            "--",
            "idem-replay",
            "abc",
            "Bearer idem_k",
            "64",
        ]
    );
    let restate = Target::new_keys("http://127.0.0.1:8080", Load::RestateNew, None);
    let args = arguments(&restate, Path::new("l.lua"), 1, 2, Duration::from_secs(1));
    assert_eq!(&args[7..], ["restate-new", &restate.prefix, "-", "1"]);
}

#[test]
fn new_key_targets_never_share_a_prefix() {
    let first = Target::new_keys("http://x", Load::IdemNew, None);
    let second = Target::new_keys("http://x", Load::IdemNew, None);
    assert_ne!(first.prefix, second.prefix);
}

#[test]
fn every_load_is_one_the_script_knows() {
    for load in [
        Load::IdemNew,
        Load::IdemReplay,
        Load::RestateNew,
        Load::RestateReplay,
    ] {
        let name = format!("\"{}\"", load.script_name());
        assert!(
            SCRIPT.contains(&format!("[{name}] = true")),
            "load.lua does not know {name}"
        );
    }
}
