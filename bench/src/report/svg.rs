//! Small SVG charts for the HTML report, written directly: horizontal bars
//! (one or more series per row, an optional marker line such as the floor
//! or a limit) and strip plots of run-to-run spread. Plain SVG 1.1 text, no
//! script, no font files: the browser lays out the labels.

use std::fmt::Write as _;

/// Colours of the series, in order.
const COLOURS: [&str; 4] = ["#3465a4", "#f57900", "#73d216", "#75507b"];
const WIDTH: f64 = 720.0;
const LABEL_W: f64 = 130.0;
const VALUE_W: f64 = 110.0;
const ROW_H: f64 = 22.0;
const TOP: f64 = 34.0;

/// A horizontal bar chart: one group of bars per row, one bar per series.
pub(crate) struct Bars<'a> {
    /// The chart's title.
    pub title: &'a str,
    /// Series names (a legend is drawn when there are several).
    pub series: &'a [&'a str],
    /// Per row: its label and one value per series.
    pub rows: Vec<(String, Vec<f64>)>,
    /// Formats a value for its label.
    pub format: fn(f64) -> String,
    /// A vertical marker: its label and value (e.g. the floor).
    pub marker: Option<(String, f64)>,
}

/// A strip plot: per row, one dot per run and a bar at the median.
pub(crate) struct Strip<'a> {
    /// The chart's title.
    pub title: &'a str,
    /// Per row: its label, every run's value, the median.
    pub rows: Vec<(String, Vec<f64>, f64)>,
    /// Formats a value for its label.
    pub format: fn(f64) -> String,
}

impl Bars<'_> {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> String {
        let per_row = self.series.len().max(1) as f64;
        let group_h = ROW_H * per_row + 8.0;
        let height = TOP + group_h * self.rows.len() as f64 + 30.0;
        let max = self
            .rows
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .chain(self.marker.iter().map(|(_, v)| *v))
            .fold(0.0_f64, f64::max);
        let scale = scale(max);
        let mut s = open(height, self.title);
        for (i, (label, values)) in self.rows.iter().enumerate() {
            let y0 = TOP + group_h * i as f64;
            text(&mut s, LABEL_W - 6.0, y0 + group_h / 2.0, "end", label);
            for (k, v) in values.iter().enumerate() {
                let y = y0 + ROW_H * k as f64;
                let w = v * scale;
                let _ = write!(
                    s,
                    r#"<rect x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"/>"#,
                    ROW_H - 4.0,
                    COLOURS[k % COLOURS.len()]
                );
                text(
                    &mut s,
                    LABEL_W + w + 4.0,
                    y + ROW_H / 2.0,
                    "start",
                    &(self.format)(*v),
                );
            }
        }
        if let Some((label, v)) = &self.marker {
            let x = LABEL_W + v * scale;
            let bottom = height - 26.0;
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#cc0000" stroke-dasharray="4 3"/>"##,
                TOP - 4.0
            );
            text(
                &mut s,
                x,
                bottom + 12.0,
                "middle",
                &format!("{label} {}", (self.format)(*v)),
            );
        }
        if self.series.len() > 1 {
            for (k, name) in self.series.iter().enumerate() {
                let x = LABEL_W + 90.0 * k as f64;
                let _ = write!(
                    s,
                    r#"<rect x="{x}" y="{:.1}" width="10" height="10" fill="{}"/>"#,
                    height - 12.0,
                    COLOURS[k % COLOURS.len()]
                );
                text(&mut s, x + 14.0, height - 7.0, "start", name);
            }
        }
        s.push_str("</svg>\n");
        s
    }
}

impl Strip<'_> {
    /// The chart as an SVG document.
    pub(crate) fn render(&self) -> String {
        let height = TOP + ROW_H * self.rows.len() as f64 + 12.0;
        let max = self
            .rows
            .iter()
            .flat_map(|(_, v, m)| v.iter().copied().chain([*m]))
            .fold(0.0_f64, f64::max);
        let scale = scale(max);
        let mut s = open(height, self.title);
        for (i, (label, values, median)) in self.rows.iter().enumerate() {
            let y = TOP + ROW_H * i as f64 + ROW_H / 2.0;
            text(&mut s, LABEL_W - 6.0, y, "end", label);
            let _ = write!(
                s,
                r##"<line x1="{LABEL_W}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/>"##,
                LABEL_W + max * scale
            );
            for v in values {
                let _ = write!(
                    s,
                    r##"<circle cx="{:.1}" cy="{y:.1}" r="4" fill="#3465a4" fill-opacity="0.6"/>"##,
                    LABEL_W + v * scale
                );
            }
            let x = LABEL_W + median * scale;
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000000" stroke-width="2"/>"##,
                y - 8.0,
                y + 8.0
            );
            text(
                &mut s,
                LABEL_W + max * scale + 8.0,
                y,
                "start",
                &(self.format)(*median),
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Pixels per unit so that `max` fills the plotting width.
fn scale(max: f64) -> f64 {
    let room = WIDTH - LABEL_W - VALUE_W;
    if max > 0.0 && max.is_finite() {
        room / max
    } else {
        0.0
    }
}

fn open(height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    text(&mut s, 8.0, 16.0, "start", title);
    s
}

fn text(s: &mut String, x: f64, y: f64, anchor: &str, t: &str) {
    let _ = write!(
        s,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" dominant-baseline="middle">{}</text>"#,
        escape(t)
    );
}

/// `t` with XML's special characters escaped.
pub(crate) fn escape(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_draw_every_row_series_and_the_marker() {
        let chart = Bars {
            title: "CPU <per> op",
            series: &["p50", "p99"],
            rows: vec![
                ("ours".into(), vec![10.0, 20.0]),
                ("tokio".into(), vec![15.0, 30.0]),
            ],
            format: |v| format!("{v:.0} µs"),
            marker: Some(("floor".into(), 8.0)),
        }
        .render();
        assert!(chart.starts_with("<svg"), "{chart}");
        assert!(chart.trim_end().ends_with("</svg>"));
        assert_eq!(chart.matches("<rect").count(), 1 + 4 + 2, "{chart}");
        assert!(chart.contains("CPU &lt;per&gt; op"));
        assert!(chart.contains("floor 8 µs"));
        assert!(chart.contains(">30 µs<"));
    }

    #[test]
    fn strips_draw_a_dot_per_run() {
        let chart = Strip {
            title: "spread",
            rows: vec![("ours".into(), vec![1.0, 2.0, 3.0], 2.0)],
            format: |v| format!("{v}"),
        }
        .render();
        assert_eq!(chart.matches("<circle").count(), 3);
        // Nothing to scale: no NaN in the output.
        let empty = Strip {
            title: "none",
            rows: vec![("x".into(), vec![0.0], 0.0)],
            format: |v| format!("{v}"),
        }
        .render();
        assert!(!empty.contains("NaN") && !empty.contains("inf"), "{empty}");
    }
}
