//! The drawing: two inline SVGs side by side, the value axis and the plot. Neither has a
//! viewBox, so their units are CSS pixels and their text is as large as the page's (the
//! stylesheet sets it); the plot's horizontal positions are percentages of its width, so it
//! fills any width without scaling its text. Colours come from classes (`hue-1`, `tick`,
//! `grid`) that style/main.css themes for light and dark.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use crate::components::chart_time;

use super::axis::{percent, value_label, TimeAxis, ValueAxis};
use super::{Series, Style};

/// The plot's height in pixels, and where its data area starts and ends.
pub const HEIGHT: f64 = 230.0;
pub const PLOT_TOP: f64 = 12.0;
pub const PLOT_BOTTOM: f64 = 200.0;
/// The baseline of the time labels.
const TIME_BASELINE: f64 = 222.0;

/// What to draw: the buckets (their starts, and the end of the last), the series and axes.
pub struct Drawing<'a> {
    pub starts: &'a [DateTime<Utc>],
    pub end: DateTime<Utc>,
    pub series: &'a [Series],
    pub style: Style,
    pub values: &'a ValueAxis,
    pub times: &'a TimeAxis,
    /// One hover text per bucket (its values), shown after its time.
    pub tips: &'a [String],
}

/// The vertical position of `value` in pixels.
pub fn y_of(value: f64, axis: &ValueAxis) -> f64 {
    let share = (value / axis.top()).clamp(0.0, 1.0);
    PLOT_BOTTOM - share * (PLOT_BOTTOM - PLOT_TOP)
}

impl Drawing<'_> {
    /// The value axis and the plot, as HTML.
    pub fn render(&self) -> String {
        format!("{}{}", self.value_axis(), self.plot())
    }

    fn value_axis(&self) -> String {
        let mut svg =
            format!(r#"<svg class="chart-y" width="100%" height="{HEIGHT}" aria-hidden="true">"#);
        for tick in &self.values.ticks {
            let _ = write!(
                svg,
                r#"<text class="tick" x="100%" dx="-6" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
                y_of(*tick, self.values),
                value_label(*tick)
            );
        }
        svg + "</svg>"
    }

    fn x(&self, at: DateTime<Utc>) -> f64 {
        let from = self.starts.first().copied().unwrap_or(self.end);
        percent(at, from, self.end)
    }

    fn bucket(&self, index: usize) -> (f64, f64) {
        let left = self.x(self.starts[index]);
        let right = self
            .starts
            .get(index + 1)
            .map_or(100.0, |next| self.x(*next));
        (left, right)
    }

    fn plot(&self) -> String {
        let mut svg = format!(
            r#"<svg class="chart-plot" width="100%" height="{HEIGHT}" role="img" aria-label="{}">"#,
            self.series
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.grid(&mut svg);
        for (n, series) in self.series.iter().enumerate() {
            if self.style == Style::Bars && n == 0 {
                self.bars(&mut svg, series);
            } else {
                self.line(&mut svg, series);
            }
        }
        self.hover(&mut svg);
        svg + "</svg>"
    }

    fn grid(&self, svg: &mut String) {
        for tick in &self.values.ticks {
            let y = y_of(*tick, self.values);
            let class = if *tick == 0.0 { "axis" } else { "grid" };
            let _ = write!(
                svg,
                r#"<line class="{class}" x1="0" x2="100%" y1="{y:.1}" y2="{y:.1}"/>"#
            );
        }
        for at in &self.times.ticks {
            let x = self.x(*at);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{x:.3}%" x2="{x:.3}%" y1="{PLOT_TOP}" y2="{PLOT_BOTTOM}"/><text class="tick" x="{x:.3}%" y="{TIME_BASELINE}" text-anchor="{}" datetime="{}" data-local="{}">{}</text>"#,
                anchor(x),
                at.to_rfc3339(),
                self.times.label.as_str(),
                self.times.label.utc(*at),
            );
        }
    }

    fn bars(&self, svg: &mut String, series: &Series) {
        for (index, value) in series.values.iter().enumerate() {
            let Some(value) = value else { continue };
            let (left, right) = self.bucket(index);
            let gap = (right - left) * 0.15;
            let y = y_of(*value, self.values);
            let _ = write!(
                svg,
                r#"<rect class="bar hue-{}" x="{:.3}%" width="{:.3}%" y="{y:.1}" height="{:.1}"/>"#,
                series.hue,
                left + gap,
                (right - left - 2.0 * gap).max(0.1),
                PLOT_BOTTOM - y,
            );
        }
    }

    /// Lines join neighbouring buckets that have a value; a bucket without one breaks the line.
    fn line(&self, svg: &mut String, series: &Series) {
        let points: Vec<Option<(f64, f64)>> = (0..self.starts.len())
            .map(|index| {
                let (left, right) = self.bucket(index);
                series.values[index].map(|v| ((left + right) / 2.0, y_of(v, self.values)))
            })
            .collect();
        for pair in points.windows(2) {
            if let [Some((x1, y1)), Some((x2, y2))] = pair {
                let _ = write!(
                    svg,
                    r#"<line class="line hue-{}" x1="{x1:.3}%" y1="{y1:.1}" x2="{x2:.3}%" y2="{y2:.1}"/>"#,
                    series.hue
                );
            }
        }
        for (x, y) in points.into_iter().flatten() {
            let _ = write!(
                svg,
                r#"<circle class="point hue-{}" cx="{x:.3}%" cy="{y:.1}" r="3"/>"#,
                series.hue
            );
        }
    }

    /// A transparent column over each bucket, last so it is on top: hovering anywhere in it
    /// shows the bucket's time and values.
    fn hover(&self, svg: &mut String) {
        for (index, at) in self.starts.iter().enumerate() {
            let (left, right) = self.bucket(index);
            let _ = write!(
                svg,
                r#"<rect class="bucket" x="{left:.3}%" width="{:.3}%" y="{PLOT_TOP}" height="{:.1}"><title datetime="{}" data-local="datetime" data-after=" — {tip}">{} UTC — {tip}</title></rect>"#,
                right - left,
                PLOT_BOTTOM - PLOT_TOP,
                at.to_rfc3339(),
                chart_time(at.naive_utc(), "datetime"),
                tip = escape(&self.tips[index]),
            );
        }
    }
}

/// Labels near an edge grow inwards, so they stay inside the chart.
fn anchor(x: f64) -> &'static str {
    match x {
        x if x < 6.0 => "start",
        x if x > 94.0 => "end",
        _ => "middle",
    }
}

/// Text for an SVG attribute or element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
