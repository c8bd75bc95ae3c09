//! The overview's charts, drawn on the server as inline SVG (see [`svg`]). Each series is one
//! value per bucket of the metrics window; the chart also carries the exact values (in a
//! `<title>` per bucket, for hover, and as the table behind it), because a picture alone is
//! neither exact nor accessible.

mod axis;
mod svg;

use chrono::{DateTime, Utc};

use crate::views::{ChartRow, ChartView, LegendEntry};
use axis::{window_end, TimeAxis, ValueAxis};

/// One line or bar series: a name, a colour (`hue-N` in the stylesheet), one value per
/// bucket (`None`: no data).
pub struct Series {
    pub name: &'static str,
    pub hue: u8,
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

/// The chart colours, by their place in the stylesheet's palette (readable on light and
/// dark backgrounds, and told apart by people with the common colour blindnesses).
pub const BLUE: u8 = 1;
pub const ORANGE: u8 = 2;
pub const RED: u8 = 3;
pub const GREEN: u8 = 4;

/// A chart of `series` over buckets starting at `starts`, with `unit` after each value.
pub fn chart(
    id: &str,
    title: &str,
    starts: &[DateTime<Utc>],
    series: &[Series],
    style: Style,
    unit: &str,
) -> ChartView {
    let values_of =
        |i: usize| -> Vec<String> { series.iter().map(|s| show(s.values[i], unit)).collect() };
    let tips: Vec<String> = (0..starts.len())
        .map(|i| {
            series
                .iter()
                .zip(values_of(i))
                .map(|(s, value)| format!("{}: {value}", s.name))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    let mut columns = vec!["Bucket start".to_owned()];
    columns.extend(series.iter().map(|s| s.name.to_owned()));
    let rows = starts
        .iter()
        .enumerate()
        .map(|(i, at)| ChartRow {
            at: *at,
            values: values_of(i),
        })
        .collect();
    let legend = series
        .iter()
        .enumerate()
        .map(|(n, s)| LegendEntry {
            name: s.name.to_owned(),
            hue: s.hue,
            bar: style == Style::Bars && n == 0,
        })
        .collect();
    ChartView {
        id: id.to_owned(),
        title: title.to_owned(),
        unit: unit.trim().to_owned(),
        drawing: draw(starts, series, style, &tips),
        legend,
        columns,
        rows,
    }
}

fn draw(starts: &[DateTime<Utc>], series: &[Series], style: Style, tips: &[String]) -> String {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied())
        .collect();
    let highest = values.iter().copied().fold(0.0_f64, f64::max);
    let whole = values.iter().all(|v| v.fract() == 0.0);
    let value_axis = ValueAxis::up_to(highest, whole);
    let end = window_end(starts).unwrap_or_else(Utc::now);
    let from = starts.first().copied().unwrap_or(end);
    let time_axis = TimeAxis::between(from, end);
    svg::Drawing {
        starts,
        end,
        series,
        style,
        values: &value_axis,
        times: &time_axis,
        tips,
    }
    .render()
}

fn show(value: Option<f64>, unit: &str) -> String {
    match value {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}{unit}"),
        Some(v) => format!("{v:.1}{unit}"),
        None => "—".to_owned(),
    }
}

#[cfg(test)]
mod tests;
