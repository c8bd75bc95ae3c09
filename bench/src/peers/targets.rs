//! Issue #33's targets against Restate, checked in each client's view: a target met only by
//! the bench's own client is not met by idem.

use super::table::{Client, Comparison, Step};
use crate::targets::{evaluate, Goal, Reference, Source, TargetResult};

/// The concurrency the targets are read at.
pub const AT: usize = 64;

/// SQLite new keys ≥ 5× Restate's new keys; replays ≥ 2× Restate's replays on each
/// database; each once per client.
pub fn targets(comparison: &[Comparison]) -> Vec<TargetResult> {
    let mut targets = Vec::new();
    for client in Client::ALL {
        let line = |step| {
            comparison
                .iter()
                .find(|c| c.step == step && c.client == client && c.concurrency == AT)
        };
        let view = client.label();
        let new = line(Step::New);
        targets.push(evaluate(
            format!("SQLite new keys at {AT} ≥ 5× Restate new keys ({view})"),
            new.and_then(|c| c.idem_sqlite),
            "/s",
            restate(Step::New, client, new.and_then(|c| c.restate)),
            Goal::AtLeast(5.0),
        ));
        let replay = line(Step::Replay);
        let databases = [
            ("sqlite", replay.and_then(|c| c.idem_sqlite)),
            ("postgres", replay.and_then(|c| c.idem_postgres)),
        ];
        for (database, measured) in databases {
            targets.push(evaluate(
                format!("replays at {AT} ({database}) ≥ 2× Restate replays ({view})"),
                measured,
                "/s",
                restate(Step::Replay, client, replay.and_then(|c| c.restate)),
                Goal::AtLeast(2.0),
            ));
        }
    }
    targets
}

fn restate(step: Step, client: Client, value: Option<f64>) -> Reference {
    Reference {
        what: format!("Restate {} at {AT} ({})", step.label(), client.label()),
        value,
        unit: "/s",
        source: Source::ThisRun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::Verdict;

    fn line(step: Step, client: Client, restate: f64, sqlite: f64) -> Comparison {
        Comparison {
            step,
            concurrency: AT,
            client,
            restate: Some(restate),
            idem_sqlite: Some(sqlite),
            sqlite_ratio: None,
            idem_postgres: None,
            postgres_ratio: None,
        }
    }

    #[test]
    fn each_target_is_judged_in_each_clients_view_at_64() {
        let comparison = [
            line(Step::New, Client::InProcess, 1000.0, 6000.0),
            line(Step::New, Client::Wrk, 1000.0, 4000.0),
            line(Step::Replay, Client::InProcess, 5000.0, 30_000.0),
            line(Step::Replay, Client::Wrk, 15_000.0, 27_000.0),
        ];
        let verdicts: Vec<(String, Verdict)> = targets(&comparison)
            .into_iter()
            .map(|t| (t.target, t.verdict))
            .collect();
        let expected = [
            (
                "SQLite new keys at 64 ≥ 5× Restate new keys (bench client)",
                Verdict::Met,
            ),
            (
                "replays at 64 (sqlite) ≥ 2× Restate replays (bench client)",
                Verdict::Met,
            ),
            (
                "replays at 64 (postgres) ≥ 2× Restate replays (bench client)",
                Verdict::NotMeasured,
            ),
            (
                "SQLite new keys at 64 ≥ 5× Restate new keys (wrk)",
                Verdict::NotMet,
            ),
            (
                "replays at 64 (sqlite) ≥ 2× Restate replays (wrk)",
                Verdict::NotMet,
            ),
            (
                "replays at 64 (postgres) ≥ 2× Restate replays (wrk)",
                Verdict::NotMeasured,
            ),
        ];
        let expected: Vec<(String, Verdict)> =
            expected.iter().map(|(t, v)| (t.to_string(), *v)).collect();
        assert_eq!(verdicts, expected);
    }

    #[test]
    fn a_view_without_rows_at_64_is_not_measured() {
        let mut other = line(Step::New, Client::Wrk, 1000.0, 9000.0);
        other.concurrency = 32;
        let results = targets(&[other]);
        assert!(results
            .iter()
            .all(|t| t.verdict == Verdict::NotMeasured && t.ratio.is_none()));
    }
}
