//! The targets as a Markdown table.

use std::fmt::Write as _;

use super::{Goal, Reference, Source, TargetResult, Verdict};

fn amount(value: f64, unit: &str) -> String {
    match unit {
        "/s" => format!("{value:.0}/s"),
        _ => format!("{value:.1} {unit}"),
    }
}

fn reference_text(reference: &Reference) -> String {
    let value = reference
        .value
        .map_or("not measured in this run".to_owned(), |v| {
            amount(v, reference.unit)
        });
    match reference.source {
        Source::ThisRun => format!("{}: {value}", reference.what),
        Source::Issue => format!(
            "{}: {value} (issue's reference, not this run)",
            reference.what
        ),
        Source::Limit => format!("{value} ({})", reference.what),
    }
}

fn goal_text(goal: Goal) -> String {
    match goal {
        Goal::AtLeast(factor) => format!("≥ {factor}"),
        Goal::AtMost(factor) => format!("≤ {factor}"),
    }
}

/// The targets as a Markdown table.
pub fn markdown(targets: &[TargetResult]) -> String {
    let mut table = String::from(
        "| target | measured | reference | ratio | needed | verdict |\n|---|---:|---|---:|---:|---|\n",
    );
    for target in targets {
        let measured = target
            .measured
            .map_or("not measured".to_owned(), |v| amount(v, target.unit));
        let ratio = target.ratio.map_or("-".to_owned(), |r| format!("{r:.2}"));
        let verdict = match target.verdict {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::NotMeasured => "not measured",
        };
        let _ = writeln!(
            table,
            "| {} | {measured} | {} | {ratio} | {} | {verdict} |",
            target.target,
            reference_text(&target.reference),
            goal_text(target.goal),
        );
    }
    table
}
