use super::svg::{y_of, PLOT_BOTTOM, PLOT_TOP};
use super::*;
use chrono::TimeZone;

fn starts(n: i64) -> Vec<DateTime<Utc>> {
    let first = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap();
    (0..n)
        .map(|i| first + chrono::Duration::minutes(5 * i))
        .collect()
}

fn duplicates() -> ChartView {
    let series = [
        Series {
            name: "replays",
            hue: BLUE,
            values: vec![Some(3.0), Some(0.0), Some(7.0)],
        },
        Series {
            name: "mismatches",
            hue: RED,
            values: vec![Some(1.0), None, Some(2.0)],
        },
    ];
    chart(
        "duplicates",
        "Duplicates",
        &starts(3),
        &series,
        Style::Bars,
        "",
    )
}

#[test]
fn a_chart_is_inline_svg_with_classes_for_its_colours() {
    let chart = duplicates();
    assert!(chart.drawing.starts_with(r#"<svg class="chart-y""#));
    assert_eq!(chart.drawing.matches("<svg").count(), 2);
    assert!(!chart.drawing.contains("viewBox"), "text must not scale");
    assert!(
        !chart.drawing.contains("style="),
        "the CSP forbids inline styles"
    );
    assert!(
        !chart.drawing.contains("fill=\"#"),
        "colours come from the stylesheet"
    );
    assert_eq!(chart.drawing.matches(r#"class="bar hue-1""#).count(), 3);
    // One segment between the two buckets that have a value: the gap breaks the line.
    assert_eq!(chart.drawing.matches(r#"class="line hue-3""#).count(), 0);
    assert_eq!(chart.drawing.matches(r#"class="point hue-3""#).count(), 2);
}

#[test]
fn every_bucket_has_a_title_with_its_time_and_values() {
    let chart = duplicates();
    assert_eq!(chart.drawing.matches("<title").count(), 3);
    assert!(chart
        .drawing
        .contains(">Dec 1 10:10 UTC — replays: 7, mismatches: 2</title>"));
    assert!(chart
        .drawing
        .contains(r#"datetime="2026-12-01T10:10:00+00:00""#));
}

#[test]
fn the_legend_and_the_table_carry_every_series() {
    let chart = duplicates();
    let names: Vec<_> = chart
        .legend
        .iter()
        .map(|e| (e.name.as_str(), e.hue, e.bar))
        .collect();
    assert_eq!(names, [("replays", BLUE, true), ("mismatches", RED, false)]);
    assert_eq!(chart.columns, ["Bucket start", "replays", "mismatches"]);
    assert_eq!(chart.rows[1].at, starts(3)[1]);
    assert_eq!(chart.rows[1].values, ["0", "—"]);
}

#[test]
fn value_ticks_are_round_and_placed_from_the_bottom_up() {
    let chart = duplicates();
    // Highest value 7: ticks 0, 2, 4, 6, 8.
    let axis = axis::ValueAxis::up_to(7.0, true);
    assert_eq!(axis.ticks, [0.0, 2.0, 4.0, 6.0, 8.0]);
    for (label, value) in [("0", 0.0), ("4", 4.0), ("8", 8.0)] {
        let y = y_of(value, &axis);
        assert!(
            chart.drawing.contains(&format!(
                r#"y="{y:.1}" text-anchor="end" dominant-baseline="middle">{label}</text>"#
            )),
            "{label} at {y}"
        );
    }
    assert_eq!(y_of(0.0, &axis), PLOT_BOTTOM);
    assert_eq!(y_of(8.0, &axis), PLOT_TOP);
}

#[test]
fn time_ticks_carry_their_instant_for_the_browser_to_show_in_local_time() {
    let chart = duplicates();
    // 10:00 to 10:15: ticks every 5 minutes, none on the edges.
    assert!(chart.drawing.contains(
        r#"x="33.333%" y="222" text-anchor="middle" datetime="2026-12-01T10:05:00+00:00" data-local="clock">10:05</text>"#
    ));
    assert!(chart
        .drawing
        .contains(r#"x="66.667%" y="222" text-anchor="middle""#));
    assert!(!chart.drawing.contains(">10:00</text>"));
}

#[test]
fn an_empty_window_still_draws_axes() {
    let series = [Series {
        name: "p50",
        hue: GREEN,
        values: vec![None, None],
    }];
    let chart = chart(
        "latency",
        "Latency",
        &starts(2),
        &series,
        Style::Lines,
        " ms",
    );
    assert!(chart.drawing.contains(r#"class="axis""#));
    assert!(chart.drawing.contains(">1</text>"), "an axis from 0 to 1");
    assert!(!chart.drawing.contains("<circle"));
    assert_eq!(chart.rows[0].values, ["—"]);
    assert_eq!(chart.unit, "ms");

    let nothing = chart_without_buckets();
    assert_eq!(nothing.drawing.matches("<title").count(), 0);
    assert!(nothing.drawing.contains(r#"class="axis""#));
}

fn chart_without_buckets() -> ChartView {
    let series = [Series {
        name: "stuck",
        hue: RED,
        values: vec![],
    }];
    chart("stuck", "Stuck", &[], &series, Style::Lines, "")
}
