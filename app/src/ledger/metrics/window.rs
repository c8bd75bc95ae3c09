//! The window a metrics request covers, and how it is cut into the buckets of its series.
//!
//! Time is counted in whole minutes since the Unix epoch ("unix minutes"), the grain of the
//! `event_minutes` roll-up. A window of N minutes is the N minutes that end with the current
//! one (which counts so far). Buckets are laid from the end backwards, so every bucket but
//! possibly the oldest is a full width; the oldest starts at the window's start.

use chrono::{DateTime, TimeDelta, Utc};
use std::fmt;

/// The longest window: 30 days, in minutes.
pub const MAX_MINUTES: i64 = 30 * 24 * 60;

/// Why a window was refused (`400 invalid_window`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("window must be a whole number of minutes, hours or days, such as 90m, 24h or 7d, from 1 minute up to 30 days; got {0:?}")]
pub struct WindowError(pub String);

/// A window such as `1h`, `24h`, `7d`: `<N>m|h|d`, at most 30 days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsWindow {
    minutes: i64,
    spelling: String,
}

impl MetricsWindow {
    /// The window's length in minutes.
    pub fn minutes(&self) -> i64 {
        self.minutes
    }

    /// Bucket width in minutes: about 12 to 120 buckets whatever the window.
    pub fn bucket_minutes(&self) -> i64 {
        match self.minutes {
            m if m <= 120 => 5,
            m if m <= 2 * 24 * 60 => 60,
            _ => 6 * 60,
        }
    }
}

impl Default for MetricsWindow {
    /// 24 hours.
    fn default() -> Self {
        Self {
            minutes: 24 * 60,
            spelling: "24h".into(),
        }
    }
}

impl fmt::Display for MetricsWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelling)
    }
}

impl TryFrom<&str> for MetricsWindow {
    type Error = WindowError;
    fn try_from(text: &str) -> Result<Self, WindowError> {
        let refuse = || WindowError(text.to_owned());
        let split = text.len().checked_sub(1).ok_or_else(refuse)?;
        let (number, unit) = text.split_at_checked(split).ok_or_else(refuse)?;
        let per_unit = match unit {
            "m" => 1,
            "h" => 60,
            "d" => 24 * 60,
            _ => return Err(refuse()),
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refuse());
        }
        let minutes = number
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(per_unit))
            .filter(|m| (1..=MAX_MINUTES).contains(m))
            .ok_or_else(refuse)?;
        Ok(Self {
            minutes,
            spelling: text.to_owned(),
        })
    }
}

/// The unix minute a time falls in.
pub fn unix_minute(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(60)
}

/// The start of a unix minute.
pub fn minute_start(minute: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(minute * 60, 0).unwrap_or(DateTime::UNIX_EPOCH)
}

/// A window placed at a moment: its minutes and its buckets. Buckets are numbered from the
/// newest (0) back; the store groups events by that number ("back").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesPlan {
    pub window: MetricsWindow,
    /// The first minute of the window.
    pub start_minute: i64,
    /// The first minute after the window: the current minute + 1.
    pub end_minute: i64,
    /// The width of a bucket, in minutes.
    pub bucket_minutes: i64,
    /// The time the plan was made at: the series' last moment.
    pub now: DateTime<Utc>,
    /// An operation `unknown` for longer than this is stuck.
    pub stuck_after: TimeDelta,
    /// Operations `unknown` since before this are stuck now.
    pub stuck_before: DateTime<Utc>,
}

/// An operation `unknown` for longer than this is "stuck", unless `IDEM_STUCK_AFTER` says
/// otherwise.
pub const DEFAULT_STUCK_AFTER: TimeDelta = TimeDelta::minutes(15);

impl SeriesPlan {
    /// The window ending with the minute of `now`; operations `unknown` for longer than
    /// `stuck_after` are stuck.
    pub fn new(window: MetricsWindow, now: DateTime<Utc>, stuck_after: TimeDelta) -> Self {
        let end_minute = unix_minute(now) + 1;
        Self {
            start_minute: end_minute - window.minutes(),
            end_minute,
            bucket_minutes: window.bucket_minutes(),
            now,
            stuck_after,
            stuck_before: now - stuck_after,
            window,
        }
    }

    /// The last moment of bucket `back` (0 = the newest, whose last moment is now): the end
    /// of the bucket, or now if that is sooner.
    pub fn bucket_end(&self, back: usize) -> DateTime<Utc> {
        let end = match back.checked_sub(1) {
            Some(newer) => minute_start(self.bucket_start_minute(newer)),
            None => self.to(),
        };
        end.min(self.now)
    }

    /// How many buckets the series has.
    pub fn buckets(&self) -> usize {
        let minutes = self.end_minute - self.start_minute;
        usize::try_from(
            minutes.div_euclid(self.bucket_minutes) + i64::from(minutes % self.bucket_minutes != 0),
        )
        .unwrap_or(0)
    }

    /// The first minute of bucket `back` (0 = the newest); the oldest starts with the window.
    pub fn bucket_start_minute(&self, back: usize) -> i64 {
        let back = i64::try_from(back).unwrap_or(i64::MAX / 2);
        (self.end_minute - (back + 1) * self.bucket_minutes).max(self.start_minute)
    }

    /// Which bucket a unix minute falls in, if it is inside the window.
    pub fn back_of_minute(&self, minute: i64) -> Option<usize> {
        if minute < self.start_minute || minute >= self.end_minute {
            return None;
        }
        usize::try_from((self.end_minute - 1 - minute) / self.bucket_minutes).ok()
    }

    /// The window's start as a time.
    pub fn from(&self) -> DateTime<Utc> {
        minute_start(self.start_minute)
    }

    /// The window's end (exclusive) as a time.
    pub fn to(&self) -> DateTime<Utc> {
        minute_start(self.end_minute)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_minutes_hours_or_days_up_to_thirty_days() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1h", Some(60)),
            ("24h", Some(1440)),
            ("7d", Some(10080)),
            ("90m", Some(90)),
            ("1m", Some(1)),
            ("30d", Some(43200)),
            ("720h", Some(43200)),
            ("31d", None),
            ("721h", None),
            ("0h", None),
            ("", None),
            ("h", None),
            ("24", None),
            ("24H", None),
            ("1w", None),
            ("-1h", None),
            ("+1h", None),
            (" 1h", None),
            ("1.5h", None),
            ("99999999999999999999d", None),
            ("1é", None),
        ];
        for (text, minutes) in cases {
            let parsed = MetricsWindow::try_from(*text).ok().map(|w| w.minutes());
            assert_eq!(parsed, *minutes, "{text:?}");
        }
        assert_eq!(MetricsWindow::default().minutes(), 1440);
    }

    #[test]
    fn bucket_widths_keep_a_series_between_twelve_and_a_hundred_and_twenty_buckets() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        for (window, width, buckets) in [
            ("1h", 5, 12),
            ("24h", 60, 24),
            ("7d", 360, 28),
            ("30d", 360, 120),
            ("7m", 5, 2),
        ] {
            let plan = SeriesPlan::new(
                MetricsWindow::try_from(window).unwrap(),
                at,
                DEFAULT_STUCK_AFTER,
            );
            assert_eq!(
                (plan.bucket_minutes, plan.buckets()),
                (width, buckets),
                "{window}"
            );
        }
    }

    #[test]
    fn buckets_end_with_the_current_minute_and_the_oldest_starts_with_the_window() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T14:35:20Z")
            .unwrap()
            .to_utc();
        let plan = SeriesPlan::new(
            MetricsWindow::try_from("7m").unwrap(),
            at,
            DEFAULT_STUCK_AFTER,
        );
        assert_eq!(plan.to().to_rfc3339(), "2026-12-01T14:36:00+00:00");
        assert_eq!(plan.from().to_rfc3339(), "2026-12-01T14:29:00+00:00");
        assert_eq!(
            minute_start(plan.bucket_start_minute(0)).to_rfc3339(),
            "2026-12-01T14:31:00+00:00"
        );
        assert_eq!(
            minute_start(plan.bucket_start_minute(1)).to_rfc3339(),
            "2026-12-01T14:29:00+00:00"
        );
        let minute = |text: &str| unix_minute(DateTime::parse_from_rfc3339(text).unwrap().to_utc());
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:35:59Z")), Some(0));
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:31:00Z")), Some(0));
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:30:59Z")), Some(1));
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:29:00Z")), Some(1));
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:28:59Z")), None);
        assert_eq!(plan.back_of_minute(minute("2026-12-01T14:36:00Z")), None);
        assert_eq!(plan.stuck_before.to_rfc3339(), "2026-12-01T14:20:20+00:00");
    }
}
