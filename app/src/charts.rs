//! The overview's charts, drawn on the server with plotters' SVG backend. Each series is one
//! value per bucket of the metrics window; the chart also carries the exact values (for
//! hover and for the table behind it), because a picture alone is neither exact nor
//! accessible.

use chrono::{DateTime, Utc};
use plotters::prelude::*;

use crate::views::ChartView;

const WIDTH: u32 = 640;
const HEIGHT: u32 = 240;
const MARGIN: u32 = 12;
const X_LABELS: u32 = 28;
const Y_LABELS: u32 = 44;
const FONT: &str = "sans-serif";

/// One line or bar series: a name, a colour, one value per bucket (`None`: no data).
pub struct Series {
    pub name: &'static str,
    pub color: RGBColor,
    pub values: Vec<Option<f64>>,
}

/// How the series are drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// The first series as bars, the others as lines over them.
    Bars,
    /// Every series as a line with points.
    Lines,
}

/// The colours of the charts, readable on light and dark backgrounds.
pub const BLUE: RGBColor = RGBColor(70, 110, 220);
pub const ORANGE: RGBColor = RGBColor(225, 135, 30);
pub const RED: RGBColor = RGBColor(205, 60, 50);
pub const GREEN: RGBColor = RGBColor(40, 150, 90);

/// A chart of `series` over buckets starting at `starts`, with `unit` after each value.
pub fn chart(
    id: &str,
    title: &str,
    starts: &[DateTime<Utc>],
    series: &[Series],
    style: Style,
    unit: &str,
) -> ChartView {
    let label = |at: &DateTime<Utc>| at.format("%m-%d %H:%M").to_string();
    let tips = starts
        .iter()
        .enumerate()
        .map(|(i, at)| {
            let values: Vec<String> = series
                .iter()
                .map(|s| format!("{}: {}", s.name, show(s.values[i], unit)))
                .collect();
            format!("{} UTC — {}", label(at), values.join(", "))
        })
        .collect();
    let mut columns = vec!["bucket start (UTC)".to_owned()];
    columns.extend(series.iter().map(|s| s.name.to_owned()));
    let rows = starts
        .iter()
        .enumerate()
        .map(|(i, at)| {
            let mut row = vec![label(at)];
            row.extend(series.iter().map(|s| show(s.values[i], unit)));
            row
        })
        .collect();
    ChartView {
        id: id.to_owned(),
        title: title.to_owned(),
        svg: draw(starts, series, style).unwrap_or_else(|error| {
            tracing::error!(%error, chart = id, "could not draw a chart");
            String::new()
        }),
        tips,
        columns,
        rows,
    }
}

fn show(value: Option<f64>, unit: &str) -> String {
    match value {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}{unit}"),
        Some(v) => format!("{v:.1}{unit}"),
        None => "—".to_owned(),
    }
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

fn draw(starts: &[DateTime<Utc>], series: &[Series], style: Style) -> DrawResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let buckets = starts.len().max(1) as u32;
        let top = series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .fold(0.0_f64, |a, &b| a.max(b));
        // Headroom above the highest value (whole numbers for counts), and a visible axis
        // when everything is zero.
        let counts = series
            .iter()
            .all(|s| s.values.iter().flatten().all(|v| v.fract() == 0.0));
        let y_max = match (top > 0.0, counts) {
            (false, _) => 1.0,
            (true, true) => (top * 1.15).ceil().max(top + 1.0),
            (true, false) => top * 1.15,
        };
        let y_labels = if counts {
            (y_max as usize).min(5) + 1
        } else {
            5
        };
        let mut chart = ChartBuilder::on(&root)
            .margin(MARGIN)
            .x_label_area_size(X_LABELS)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d((0..buckets).into_segmented(), 0.0..y_max)?;
        let label = |at: &DateTime<Utc>| at.format("%H:%M").to_string();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(128, 128, 128).mix(0.3))
            .axis_style(RGBColor(128, 128, 128))
            .label_style((FONT, 11).into_font().color(&RGBColor(128, 128, 128)))
            .x_labels(6)
            .y_labels(y_labels)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    starts.get(*i as usize).map(label).unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .draw()?;
        for (n, s) in series.iter().enumerate() {
            if style == Style::Bars && n == 0 {
                let color = s.color.mix(0.75);
                chart
                    .draw_series(
                        Histogram::vertical(&chart)
                            .style(color.filled())
                            .margin(1)
                            .data(
                                s.values
                                    .iter()
                                    .enumerate()
                                    .filter_map(|(i, v)| v.map(|v| (i as u32, v))),
                            ),
                    )?
                    .label(s.name)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 4), (x + 10, y + 4)], color.filled())
                    });
            } else {
                let points: Vec<(SegmentValue<u32>, f64)> = s
                    .values
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.map(|v| (SegmentValue::CenterOf(i as u32), v)))
                    .collect();
                let color = s.color;
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                    .label(s.name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 12, y)], color.stroke_width(2))
                    });
                chart.draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 2, s.color.filled())),
                )?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.7))
            .border_style(RGBColor(128, 128, 128).mix(0.4))
            .label_font((FONT, 11).into_font().color(&RGBColor(60, 60, 60)))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A rectangle in percent of the chart's size.
    struct PlotArea {
        left: f64,
        top: f64,
        width: f64,
        height: f64,
    }

    /// The plotting area in percent of the whole SVG (the margins and label areas set below);
    /// the stylesheet lays the hover columns over it.
    fn plot_area() -> PlotArea {
        let (w, h) = (f64::from(WIDTH), f64::from(HEIGHT));
        let left = f64::from(MARGIN + Y_LABELS);
        let top = f64::from(MARGIN);
        PlotArea {
            left: left / w * 100.0,
            top: top / h * 100.0,
            width: (w - left - f64::from(MARGIN)) / w * 100.0,
            height: (h - top - f64::from(MARGIN + X_LABELS)) / h * 100.0,
        }
    }

    fn starts(n: i64) -> Vec<DateTime<Utc>> {
        let first = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap();
        (0..n)
            .map(|i| first + chrono::Duration::minutes(5 * i))
            .collect()
    }

    #[test]
    fn a_chart_is_an_svg_with_exact_values_per_bucket() {
        let series = [
            Series {
                name: "replays",
                color: BLUE,
                values: vec![Some(3.0), Some(0.0), Some(7.0)],
            },
            Series {
                name: "mismatches",
                color: RED,
                values: vec![Some(1.0), None, Some(2.0)],
            },
        ];
        let chart = chart(
            "duplicates",
            "Duplicates",
            &starts(3),
            &series,
            Style::Bars,
            "",
        );
        assert!(
            chart.svg.starts_with("<svg"),
            "{}",
            &chart.svg[..40.min(chart.svg.len())]
        );
        assert!(chart.svg.contains("<rect"), "bars are drawn");
        assert!(
            chart.svg.contains("<polyline") || chart.svg.contains("<path"),
            "lines are drawn"
        );
        assert_eq!(chart.tips.len(), 3);
        assert_eq!(chart.tips[2], "12-01 10:10 UTC — replays: 7, mismatches: 2");
        assert_eq!(
            chart.columns,
            ["bucket start (UTC)", "replays", "mismatches"]
        );
        assert_eq!(chart.rows[1], ["12-01 10:05", "0", "—"]);
    }

    #[test]
    fn an_empty_window_still_draws_axes() {
        let series = [Series {
            name: "p50",
            color: GREEN,
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
        assert!(chart.svg.starts_with("<svg"));
        assert_eq!(chart.rows[0][1], "—");
    }

    /// The hover columns are placed by the stylesheet (the CSP forbids inline styles), so
    /// its numbers must be the plotting area's.
    #[test]
    fn the_stylesheet_places_the_hover_columns_over_the_plotting_area() {
        let css = include_str!("../../style/main.css");
        let area = plot_area();
        let rule = format!(
            "left: {:.3}%; top: {:.3}%; width: {:.3}%; height: {:.3}%;",
            area.left, area.top, area.width, area.height
        );
        assert!(
            css.contains(&rule),
            "style/main.css must have `.chart-hover {{ {rule} }}`"
        );
    }

    #[test]
    fn the_plot_area_lies_inside_the_chart() {
        let area = plot_area();
        assert!(area.left > 0.0 && area.top > 0.0);
        assert!(area.left + area.width < 100.0 && area.top + area.height < 100.0);
    }
}
