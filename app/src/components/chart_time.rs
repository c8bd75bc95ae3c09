//! How a chart's times read, the same on the server (in UTC) and in the browser (in the
//! viewer's zone, `crate::browser::local_time`): one function, so both write alike.

use chrono::{Datelike, NaiveDateTime, Timelike};

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `clock`: `14:30`; `day`: `Dec 3`; anything else (`datetime`): `Dec 3 14:30`. Written by
/// hand rather than with chrono's formatter, which would weigh on the browser's bundle.
pub fn chart_time(at: NaiveDateTime, kind: &str) -> String {
    let clock = format!("{:02}:{:02}", at.hour(), at.minute());
    let day = format!("{} {}", MONTHS[at.month0() as usize], at.day());
    match kind {
        "clock" => clock,
        "day" => day,
        _ => format!("{day} {clock}"),
    }
}

/// The note under the charts: which zone their times are in, from its offset east of UTC.
pub fn zone_note(offset_minutes: i32) -> String {
    if offset_minutes == 0 {
        return "Chart times: UTC".to_owned();
    }
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let minutes = offset_minutes.unsigned_abs();
    format!(
        "Chart times: local (UTC{sign}{:02}:{:02})",
        minutes / 60,
        minutes % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    #[test]
    fn chart_times_read_as_clock_day_or_both() {
        let at = NaiveDate::from_ymd_opt(2026, 12, 3)
            .unwrap()
            .and_hms_opt(9, 5, 0)
            .unwrap();
        assert_eq!(chart_time(at, "clock"), "09:05");
        assert_eq!(chart_time(at, "day"), "Dec 3");
        assert_eq!(chart_time(at, "datetime"), "Dec 3 09:05");
    }

    #[test]
    fn the_zone_note_names_the_offset() {
        assert_eq!(zone_note(0), "Chart times: UTC");
        assert_eq!(zone_note(60), "Chart times: local (UTC+01:00)");
        assert_eq!(zone_note(-330), "Chart times: local (UTC-05:30)");
    }
}
