//! Times shown relative to now ("3 min ago"), with the absolute time on hover.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

/// `<time>` with a relative text and the absolute UTC time as its title; in the browser the
/// text ages (`data-relative`, see `crate::browser::clock`).
#[component]
pub fn RelativeTime(at: DateTime<Utc>) -> impl IntoView {
    view! {
        <time
            datetime=at.to_rfc3339()
            title=at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
            data-relative=""
        >
            {relative(at, Utc::now())}
        </time>
    }
}

/// "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago", or "in 5 min" for the future.
pub fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - at).num_seconds();
    let (amount, future) = (seconds.unsigned_abs(), seconds < 0);
    let text = match amount {
        0..=4 => return "just now".to_owned(),
        5..=59 => format!("{amount} s"),
        60..=3_599 => format!("{} min", amount / 60),
        3_600..=86_399 => format!("{} h", amount / 3_600),
        _ => format!("{} d", amount / 86_400),
    };
    if future {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::relative;
    use chrono::{Duration, TimeZone, Utc};

    #[test]
    fn relative_times_read_naturally() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
        let cases = [
            (Duration::seconds(2), "just now"),
            (Duration::seconds(42), "42 s ago"),
            (Duration::minutes(5), "5 min ago"),
            (Duration::hours(3), "3 h ago"),
            (Duration::days(2), "2 d ago"),
            (Duration::minutes(-5), "in 5 min"),
        ];
        for (ago, expected) in cases {
            assert_eq!(relative(now - ago, now), expected, "{ago}");
        }
    }
}
