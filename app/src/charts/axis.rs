//! Where the ticks of a chart go: round steps on the value axis (1, 2 or 5 × 10ⁿ) and round
//! times on the time axis, so a reader can interpolate at a glance.

use chrono::{DateTime, TimeDelta, Utc};

/// At most this many steps on the value axis.
const VALUE_STEPS: f64 = 4.0;
/// At most this many steps between time ticks (labels stay apart on a phone).
const TIME_STEPS: i64 = 5;
/// Candidate time steps, in minutes.
const TIME_STEP_MINUTES: [i64; 12] = [5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080];

/// The value axis: its ticks from 0 up, evenly `step` apart; the last is the axis' top.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueAxis {
    pub step: f64,
    pub ticks: Vec<f64>,
}

impl ValueAxis {
    /// The axis for values up to `highest`: ticks at a round step, the top at or above it.
    /// Counts (`whole`) step by at least 1; an empty or all-zero chart still has an axis.
    pub fn up_to(highest: f64, whole: bool) -> Self {
        let highest = if highest.is_finite() && highest > 0.0 {
            highest
        } else {
            0.0
        };
        let mut step = round_step(highest / VALUE_STEPS);
        if whole {
            step = step.max(1.0);
        }
        let steps = (highest / step).ceil().max(1.0) as usize;
        let ticks = (0..=steps).map(|n| step * n as f64).collect();
        Self { step, ticks }
    }

    /// The axis' top value.
    pub fn top(&self) -> f64 {
        self.ticks.last().copied().unwrap_or(1.0)
    }
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `raw` (1 for nothing).
pub fn round_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|candidate| *candidate >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// A tick's label: whole numbers, thousands as `k` so the gutter stays narrow.
pub fn value_label(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{}k", trim(value / 1000.0))
    } else {
        trim(value)
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// How a time tick reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLabel {
    /// `14:30`: ticks less than a day apart.
    Clock,
    /// `Dec 3`: ticks a day or more apart.
    Day,
}

impl TimeLabel {
    /// The name the browser's local-time module knows it by (`data-local`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clock => "clock",
            Self::Day => "day",
        }
    }

    /// The label of `at` in UTC, as the server renders it.
    pub fn utc(self, at: DateTime<Utc>) -> String {
        crate::components::chart_time(at.naive_utc(), self.as_str())
    }
}

/// The time axis from `from` to `to`: ticks at whole multiples of a round step.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeAxis {
    pub ticks: Vec<DateTime<Utc>>,
    pub label: TimeLabel,
}

impl TimeAxis {
    /// Ticks inside `[from, to]`, at most [`TIME_STEPS`] steps, none within a third of a
    /// step of either end.
    pub fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let span = (to - from).num_minutes().max(1);
        let step = TIME_STEP_MINUTES
            .into_iter()
            .find(|step| span / step <= TIME_STEPS)
            .unwrap_or(TIME_STEP_MINUTES[TIME_STEP_MINUTES.len() - 1]);
        let first = from.timestamp().div_euclid(60).div_euclid(step) * step;
        let ticks = (0..)
            .map(|n| first + n * step)
            .map(|minute| DateTime::from_timestamp(minute * 60, 0).unwrap_or(from))
            .skip_while(|at| *at < from)
            .take_while(|at| *at <= to)
            // A label hard by an edge grows inwards into its neighbour's place (seen on a
            // phone: "16:30 16:45" ran together); a third of a step keeps them apart.
            .filter(|at| {
                let margin = TimeDelta::minutes(step) / 3;
                *at - from >= margin && to - *at >= margin
            })
            .collect();
        let label = if step >= 1440 {
            TimeLabel::Day
        } else {
            TimeLabel::Clock
        };
        Self { ticks, label }
    }
}

/// Where `at` lies between `from` and `to`, in percent (0 at `from`).
pub fn percent(at: DateTime<Utc>, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    let span = (to - from).num_seconds().max(1) as f64;
    (at - from).num_seconds() as f64 / span * 100.0
}

/// The end of the last bucket: its start plus the width of the buckets before it.
pub fn window_end(starts: &[DateTime<Utc>]) -> Option<DateTime<Utc>> {
    let last = *starts.last()?;
    let width = match starts {
        [.., before, last] => *last - *before,
        _ => TimeDelta::minutes(5),
    };
    Some(last + width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn steps_are_one_two_or_five_times_a_power_of_ten() {
        for (raw, step) in [
            (0.0, 1.0),
            (0.3, 0.5),
            (1.0, 1.0),
            (1.2, 2.0),
            (2.5, 5.0),
            (7.0, 10.0),
            (40.0, 50.0),
            (130.0, 200.0),
            (1_800.0, 2_000.0),
            (f64::NAN, 1.0),
        ] {
            assert_eq!(round_step(raw), step, "{raw}");
        }
    }

    #[test]
    fn the_value_axis_covers_the_highest_value_in_round_steps() {
        let axis = ValueAxis::up_to(9.0, true);
        assert_eq!(axis.step, 5.0);
        assert_eq!(axis.ticks, [0.0, 5.0, 10.0]);
        let axis = ValueAxis::up_to(730.0, false);
        assert_eq!(axis.step, 200.0);
        assert_eq!(axis.top(), 800.0);
        let axis = ValueAxis::up_to(3.0, true);
        assert_eq!(axis.ticks, [0.0, 1.0, 2.0, 3.0]);
        for highest in [0.0, 1.0, 17.0, 99.0, 12_345.0] {
            let axis = ValueAxis::up_to(highest, true);
            assert!(axis.top() >= highest, "{highest}");
            assert!(axis.ticks.len() <= 6, "{highest}: {:?}", axis.ticks);
        }
    }

    #[test]
    fn an_empty_chart_has_an_axis_from_zero_to_one() {
        assert_eq!(ValueAxis::up_to(0.0, true).ticks, [0.0, 1.0]);
        assert_eq!(ValueAxis::up_to(f64::NAN, false).ticks, [0.0, 1.0]);
    }

    #[test]
    fn value_labels_are_short() {
        assert_eq!(value_label(0.0), "0");
        assert_eq!(value_label(2.5), "2.5");
        assert_eq!(value_label(2000.0), "2000");
        assert_eq!(value_label(20_000.0), "20k");
    }

    #[test]
    fn time_ticks_fall_on_round_times_inside_the_window() {
        let at = |h, m| Utc.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap();
        let axis = TimeAxis::between(at(13, 36), at(14, 36));
        assert_eq!(axis.label, TimeLabel::Clock);
        assert_eq!(axis.ticks, [at(13, 45), at(14, 0), at(14, 15), at(14, 30)]);
        assert_eq!(TimeLabel::Clock.utc(at(14, 0)), "14:00");

        let day = TimeAxis::between(at(14, 36) - TimeDelta::days(7), at(14, 36));
        assert_eq!(day.label, TimeLabel::Day);
        assert!(
            day.ticks.len() <= 6 && day.ticks.len() >= 2,
            "{:?}",
            day.ticks
        );
        assert!(day.ticks.iter().all(|t| t.timestamp() % 86_400 == 0));
        assert_eq!(TimeLabel::Day.utc(at(0, 0)), "Dec 1");
    }

    #[test]
    fn positions_run_from_the_window_start_to_its_end() {
        let from = Utc.with_ymd_and_hms(2026, 12, 1, 14, 0, 0).unwrap();
        let to = from + TimeDelta::hours(1);
        assert_eq!(percent(from, from, to), 0.0);
        assert_eq!(percent(from + TimeDelta::minutes(15), from, to), 25.0);
        assert_eq!(percent(to, from, to), 100.0);
        let starts = [from, from + TimeDelta::minutes(5)];
        assert_eq!(window_end(&starts), Some(from + TimeDelta::minutes(10)));
        assert_eq!(window_end(&[]), None);
    }
}
