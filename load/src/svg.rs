//! `--plot`: a hand-written SVG of p95/p99 latency (left axis) and achieved rate (right axis)
//! against offered rate, with the ideal `achieved = offered` diagonal, the p95 limit and the
//! knee marked. SVG needs no plotting dependency, renders in any browser and diffs as text.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::report::Report;
use crate::units::si;

const W: f64 = 860.0;
const H: f64 = 500.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 90.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// A "nice" tick spacing (1, 2 or 5 x 10^k) giving about `n` ticks over `0..max`.
pub fn nice_step(max: f64, n: usize) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders the report as an SVG document.
pub fn render(report: &Report, title: &str) -> String {
    let steps = &report.steps;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let max_offered = steps.iter().map(|s| s.offered_pps).fold(0.0, f64::max);
    let max_rate = steps
        .iter()
        .map(|s| s.achieved_pps.max(s.offered_pps))
        .fold(0.0, f64::max);
    let max_lat = steps
        .iter()
        .filter_map(|s| s.p99_ms.or(s.p95_ms))
        .chain(report.p95_limit_ms)
        .fold(0.0, f64::max);
    let x_step = nice_step(max_offered, 8);
    let x_max = ((max_offered / x_step).ceil() * x_step).max(x_step);
    let r_step = nice_step(max_rate, 5);
    let r_max = ((max_rate / r_step).ceil() * r_step).max(r_step);
    let l_step = nice_step(max_lat * 1.05, 5);
    let l_max = ((max_lat * 1.05 / l_step).ceil() * l_step).max(l_step);
    let x = |v: f64| LEFT + plot_w * (v / x_max);
    let yl = |v: f64| TOP + plot_h * (1.0 - v / l_max);
    let yr = |v: f64| TOP + plot_h * (1.0 - v / r_max);

    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    // Grid and axes.
    let mut t = 0.0;
    while t <= x_max + x_step * 1e-6 {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#eee"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            x(t),
            TOP + plot_h,
            TOP + plot_h + 18.0,
            si(t)
        );
        t += x_step;
    }
    let mut t = 0.0;
    while t <= l_max + l_step * 1e-6 {
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#eee"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            yl(t),
            LEFT + plot_w,
            LEFT - 6.0,
            yl(t) + 4.0,
            si(t)
        );
        t += l_step;
    }
    let mut t = 0.0;
    while t <= r_max + r_step * 1e-6 {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#1f77b4">{}</text>"##,
            LEFT + plot_w + 6.0,
            yr(t) + 4.0,
            si(t)
        );
        t += r_step;
    }
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">offered points/s</text>"#,
        LEFT + plot_w / 2.0,
        H - 15.0
    );
    let _ = write!(
        s,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">latency (ms)</text>"#,
        TOP + plot_h / 2.0
    );
    let _ = write!(
        s,
        r##"<text transform="translate({:.1} {:.1}) rotate(90)" text-anchor="middle" fill="#1f77b4">achieved points/s</text>"##,
        W - 20.0,
        TOP + plot_h / 2.0
    );
    // Ideal line: achieved = offered.
    let _ = write!(
        s,
        r##"<line class="ideal" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#1f77b4" stroke-opacity="0.4" stroke-dasharray="4 4"/>"##,
        x(0.0),
        yr(0.0),
        x(max_offered.min(r_max)),
        yr(max_offered.min(r_max))
    );
    if let Some(limit) = report.p95_limit_ms {
        let _ = write!(
            s,
            r##"<line class="limit" x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ff7f0e" stroke-dasharray="6 3"/><text x="{2:.1}" y="{3:.1}" fill="#ff7f0e">p95 limit {4:.0} ms</text>"##,
            yl(limit),
            LEFT + plot_w,
            LEFT + 6.0,
            yl(limit) - 4.0,
            limit
        );
    }
    type Line<'a> = (&'a str, &'a str, Vec<(f64, f64)>);
    let series: [Line; 3] = [
        (
            "achieved",
            "#1f77b4",
            steps
                .iter()
                .map(|st| (x(st.offered_pps), yr(st.achieved_pps)))
                .collect(),
        ),
        (
            "p95",
            "#ff7f0e",
            steps
                .iter()
                .filter_map(|st| st.p95_ms.map(|v| (x(st.offered_pps), yl(v))))
                .collect(),
        ),
        (
            "p99",
            "#d62728",
            steps
                .iter()
                .filter_map(|st| st.p99_ms.map(|v| (x(st.offered_pps), yl(v))))
                .collect(),
        ),
    ];
    for (name, color, pts) in &series {
        let list: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let _ = write!(
            s,
            r#"<polyline class="{name}" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            list.join(" ")
        );
        for (a, b) in pts {
            let _ = write!(
                s,
                r#"<circle cx="{a:.1}" cy="{b:.1}" r="3" fill="{color}"/>"#
            );
        }
    }
    if let Some(k) = report.knee_pps {
        let _ = write!(
            s,
            r##"<line class="knee" x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#2ca02c" stroke-width="2"/><text x="{2:.1}" y="{3:.1}" fill="#2ca02c">knee {4}</text>"##,
            x(k),
            TOP + plot_h,
            x(k) + 4.0,
            TOP + 14.0,
            si(k)
        );
    }
    // Legend.
    let legend = [
        ("achieved points/s", "#1f77b4"),
        ("p95 latency", "#ff7f0e"),
        ("p99 latency", "#d62728"),
        ("knee", "#2ca02c"),
    ];
    for (i, (label, color)) in legend.iter().enumerate() {
        let lx = LEFT + 10.0 + i as f64 * 150.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="34" width="12" height="4" fill="{color}"/><text x="{:.1}" y="40">{label}</text>"#,
            lx + 16.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Writes the plot to `path`.
pub fn write(report: &Report, title: &str, path: &str) -> Result<()> {
    std::fs::write(path, render(report, title)).map_err(|source| Error::Output {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StepResult;
    use std::collections::BTreeMap;

    fn step(i: usize, offered: f64, achieved: f64, p95: Option<f64>) -> StepResult {
        StepResult {
            step: i,
            offered_pps: offered,
            achieved_pps: achieved,
            p50_ms: p95.map(|v| v / 2.0),
            p95_ms: p95,
            p99_ms: p95.map(|v| v * 1.4),
            max_ms: p95,
            dropped: 0,
            errors: 0,
            offered_rps: 0.0,
            achieved_rps: 0.0,
            requests: 0,
            ok: 0,
            dropped_points: 0,
            late: 0,
            max_lag_ms: 0.0,
            errors_by_status: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            duration_s: 1.0,
            vus: None,
            pass: None,
            verdict: String::new(),
        }
    }

    fn report(steps: Vec<StepResult>, knee: Option<f64>) -> Report {
        Report {
            steps,
            knee_pps: knee,
            knee_p95_ms: None,
            p95_limit_ms: Some(50.0),
            mode: "ramp".into(),
            stopped_early: false,
            points_per_request: 1,
            series: 1,
            fields: 1,
            format: "lp".into(),
            gzip: false,
            connections: 1,
            target: "x:1".into(),
        }
    }

    fn polyline_points(svg: &str, class: &str) -> usize {
        let tag = format!(r#"<polyline class="{class}" points=""#);
        svg.find(&tag)
            .map(|i| &svg[i + tag.len()..])
            .and_then(|rest| rest.split('"').next())
            .map_or(0, |p| p.split_whitespace().count())
    }

    #[test]
    fn plot_is_well_formed_and_complete() {
        let r = report(
            vec![
                step(1, 200_000.0, 200_000.0, Some(20.0)),
                step(2, 400_000.0, 399_000.0, Some(30.0)),
                step(3, 600_000.0, 450_000.0, Some(900.0)),
                step(4, 800_000.0, 0.0, None),
            ],
            Some(400_000.0),
        );
        let svg = render(&r, "sluice <test> & co");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(svg.contains("sluice &lt;test&gt; &amp; co"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_eq!(polyline_points(&svg, "achieved"), 4);
        assert_eq!(polyline_points(&svg, "p95"), 3);
        assert_eq!(polyline_points(&svg, "p99"), 3);
        assert!(svg.contains(r#"class="knee""#) && svg.contains("knee 400k"));
        assert!(svg.contains(r#"class="limit""#));
        // Every element opened is closed (all are self-closing except svg and text).
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        // Coordinates stay inside the canvas.
        for cap in svg.split("cx=\"").skip(1) {
            let v: f64 = cap
                .split('"')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0);
            assert!((0.0..=W).contains(&v), "{v}");
        }
    }

    #[test]
    fn degenerate_inputs_render() {
        let svg = render(&report(vec![], None), "empty");
        assert!(svg.ends_with("</svg>\n") && !svg.contains("NaN"));
        assert!(!svg.contains(r#"class="knee""#));
        let svg = render(&report(vec![step(1, 0.0, 0.0, None)], None), "zero");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(3_000_000.0, 8), 500_000.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
    }
}
