//! What a run produces: the per-step rows (terminal table and `--json`), with the field names
//! the issue fixes (`offered_pps`, `achieved_pps`, `p50_ms`, `p95_ms`, `p99_ms`, `dropped`,
//! `errors`, and top-level `knee_pps`) so scripts and the operator can rely on them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::knee::StepFigures;
use crate::units::thousands;

/// The most a Kubernetes termination message holds.
pub const SUMMARY_MAX_BYTES: usize = 4096;

/// One step of a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepResult {
    /// 1-based step number.
    pub step: usize,
    /// Points per second scheduled (dropped ones included).
    pub offered_pps: f64,
    /// Points per second acknowledged with a 2xx.
    pub achieved_pps: f64,
    /// Latency percentiles of successful requests, from their scheduled time, ms.
    pub p50_ms: Option<f64>,
    /// p95, ms.
    pub p95_ms: Option<f64>,
    /// p99, ms.
    pub p99_ms: Option<f64>,
    /// Slowest successful request, ms.
    pub max_ms: Option<f64>,
    /// Requests that found no free connection in time (never sent).
    pub dropped: u64,
    /// Requests sent that did not get a 2xx (sum of `errors_by_status`).
    pub errors: u64,
    /// Requests per second scheduled.
    pub offered_rps: f64,
    /// Requests per second acknowledged.
    pub achieved_rps: f64,
    /// Requests scheduled.
    pub requests: u64,
    /// Requests acknowledged.
    pub ok: u64,
    /// Points of the dropped requests.
    pub dropped_points: u64,
    /// Requests the dispatcher itself issued later than the tolerance (client too slow).
    pub late: u64,
    /// The dispatcher's largest lateness, ms.
    pub max_lag_ms: f64,
    /// Errors by HTTP status or by `connect`/`io`/`timeout`/`protocol`/`unfinished`.
    pub errors_by_status: BTreeMap<String, u64>,
    /// The first response body (or failure) of each error kind.
    pub error_samples: BTreeMap<String, String>,
    /// Length of the step, s.
    pub duration_s: f64,
    /// Virtual users (closed model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vus: Option<usize>,
    /// Below the knee by the rules (open model only).
    pub pass: Option<bool>,
    /// `ok` or the rules broken.
    pub verdict: String,
}

impl StepResult {
    /// What the knee rules look at.
    pub fn figures(&self) -> StepFigures {
        StepFigures {
            offered_pps: self.offered_pps,
            achieved_pps: self.achieved_pps,
            p95_ms: self.p95_ms,
            dropped: self.dropped,
        }
    }
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Steps in the order run.
    pub steps: Vec<StepResult>,
    /// Offered points/s of the knee step; `null` when no step passed (or closed model).
    pub knee_pps: Option<f64>,
    /// p95 at the knee, ms.
    pub knee_p95_ms: Option<f64>,
    /// The p95 limit applied, ms.
    pub p95_limit_ms: Option<f64>,
    /// `ramp`, `open` or `closed`.
    pub mode: String,
    /// The ramp stopped before its last step (stopping rule).
    pub stopped_early: bool,
    /// Points per request.
    pub points_per_request: usize,
    /// Distinct series.
    pub series: usize,
    /// Float fields per point.
    pub fields: usize,
    /// `lp` or `msgpack`.
    pub format: String,
    /// Bodies gzip-compressed.
    pub gzip: bool,
    /// Connections (open model).
    pub connections: usize,
    /// `host:port`.
    pub target: String,
}

impl Report {
    /// Writes the JSON report.
    pub fn write_json(&self, path: &str) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").map_err(|source| Error::Output {
            path: path.into(),
            source,
        })
    }

    /// The run in at most `max_bytes` of JSON: the knee, the payload and every step as
    /// `[offered_pps, achieved_pps, p95_ms, dropped, errors, pass]`, rounded. Made for a
    /// Kubernetes termination message (4 KiB), which is how the operator's calibration pod
    /// reports without anyone reading its logs; when the steps do not fit, the earliest go.
    pub fn compact_json(&self, max_bytes: usize) -> String {
        let round = |v: f64| (v * 10.0).round() / 10.0;
        let mut steps: Vec<serde_json::Value> = self
            .steps
            .iter()
            .map(|s| {
                serde_json::json!([
                    s.offered_pps.round(),
                    s.achieved_pps.round(),
                    s.p95_ms.map(round),
                    s.dropped,
                    s.errors,
                    u8::from(s.pass == Some(true)),
                ])
            })
            .collect();
        loop {
            let v = serde_json::json!({
                "knee_pps": self.knee_pps.map(f64::round),
                "knee_p95_ms": self.knee_p95_ms.map(round),
                "p95_limit_ms": self.p95_limit_ms.map(round),
                "mode": self.mode,
                "points_per_request": self.points_per_request,
                "series": self.series,
                "fields": self.fields,
                "format": self.format,
                "gzip": self.gzip,
                "steps": steps,
            });
            let text = v.to_string();
            if text.len() <= max_bytes || steps.is_empty() {
                return text;
            }
            steps.remove(0);
        }
    }

    /// Writes [`Report::compact_json`] (at most 4 KiB) to `path`.
    pub fn write_summary(&self, path: &str) -> Result<()> {
        std::fs::write(path, self.compact_json(SUMMARY_MAX_BYTES)).map_err(|source| Error::Output {
            path: path.into(),
            source,
        })
    }

    /// The closing line(s) of the table.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        match (self.mode.as_str(), self.knee_pps) {
            ("closed", _) => {}
            (_, Some(k)) => out.push_str(&format!(
                "knee: {} points/s (p95 {}, limit {})",
                thousands(k),
                ms(self.knee_p95_ms),
                ms(self.p95_limit_ms)
            )),
            (_, None) => out.push_str(&format!(
                "knee: none (no step met the rules; p95 limit {})",
                ms(self.p95_limit_ms)
            )),
        }
        if self.stopped_early {
            out.push_str("; ramp stopped after failed step(s)");
        }
        let late: u64 = self.steps.iter().map(|s| s.late).sum();
        if late > 0 {
            out.push_str(&format!(
                "\nwarning: {late} request(s) were dispatched late by the generator itself (busy machine?); their latency includes the delay"
            ));
        }
        for s in &self.steps {
            for (kind, sample) in &s.error_samples {
                out.push_str(&format!("\nstep {} first {kind}: {sample}", s.step));
            }
        }
        out
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1} ms"))
}

fn cell(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The table's header line.
pub fn table_header() -> String {
    format!(
        "{:>4} {:>12} {:>12} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}  {}",
        "step",
        "offered/s",
        "achieved/s",
        "ach%",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "dropped",
        "errors",
        "verdict"
    )
}

/// One row of the table.
pub fn table_row(s: &StepResult) -> String {
    let pct = if s.offered_pps > 0.0 {
        format!("{:.1}", 100.0 * s.achieved_pps / s.offered_pps)
    } else {
        "-".into()
    };
    let mut verdict = s.verdict.clone();
    if let Some(v) = s.vus {
        verdict = format!("{v} VUs");
    }
    if !s.errors_by_status.is_empty() {
        let kinds: Vec<String> = s
            .errors_by_status
            .iter()
            .map(|(k, n)| format!("{k}x{n}"))
            .collect();
        verdict.push_str(&format!(" [{}]", kinds.join(" ")));
    }
    if s.late > 0 {
        verdict.push_str(&format!(" (late {})", s.late));
    }
    format!(
        "{:>4} {:>12} {:>12} {:>6} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}  {}",
        s.step,
        thousands(s.offered_pps),
        thousands(s.achieved_pps),
        pct,
        cell(s.p50_ms),
        cell(s.p95_ms),
        cell(s.p99_ms),
        cell(s.max_ms),
        s.dropped,
        s.errors,
        verdict
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(step: usize, offered: f64, achieved: f64, p95: Option<f64>) -> StepResult {
        StepResult {
            step,
            offered_pps: offered,
            achieved_pps: achieved,
            p50_ms: p95.map(|v| v / 2.0),
            p95_ms: p95,
            p99_ms: p95.map(|v| v * 1.5),
            max_ms: p95.map(|v| v * 2.0),
            dropped: 0,
            errors: 0,
            offered_rps: offered / 100.0,
            achieved_rps: achieved / 100.0,
            requests: 10,
            ok: 10,
            dropped_points: 0,
            late: 0,
            max_lag_ms: 0.0,
            errors_by_status: BTreeMap::new(),
            error_samples: BTreeMap::new(),
            duration_s: 1.0,
            vus: None,
            pass: Some(true),
            verdict: "ok".into(),
        }
    }

    #[test]
    fn json_has_the_agreed_names() {
        let report = Report {
            steps: vec![
                sample(1, 1000.0, 1000.0, Some(12.5)),
                sample(2, 2000.0, 1500.0, None),
            ],
            knee_pps: Some(1000.0),
            knee_p95_ms: Some(12.5),
            p95_limit_ms: Some(31.25),
            mode: "ramp".into(),
            stopped_early: false,
            points_per_request: 100,
            series: 10,
            fields: 5,
            format: "lp".into(),
            gzip: false,
            connections: 4,
            target: "h:1".into(),
        };
        let v: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&report).unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(v["knee_pps"], 1000.0);
        for key in [
            "offered_pps",
            "achieved_pps",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "dropped",
            "errors",
        ] {
            assert!(v["steps"][0].get(key).is_some(), "{key}");
        }
        assert!(v["steps"][1]["p95_ms"].is_null());
        assert!(v["steps"][0]["errors"].is_u64());
        assert!(report
            .summary()
            .starts_with("knee: 1,000 points/s (p95 12.5 ms"));
        let row = table_row(&report.steps[0]);
        assert!(
            row.contains("1,000") && row.contains("100.0") && row.ends_with("ok"),
            "{row}"
        );
        assert_eq!(
            table_header().len() - "verdict".len(),
            row.len() - "ok".len()
        );
    }

    #[test]
    fn the_compact_summary_fits_a_termination_message() {
        let steps: Vec<StepResult> = (1..=300)
            .map(|i| sample(i, 123_456.7 * i as f64, 123_450.0 * i as f64, Some(12.345)))
            .collect();
        let report = Report {
            steps,
            knee_pps: Some(1_234_567.4),
            knee_p95_ms: Some(12.345),
            p95_limit_ms: Some(250.0),
            mode: "search".into(),
            stopped_early: false,
            points_per_request: 5000,
            series: 1000,
            fields: 5,
            format: "lp".into(),
            gzip: false,
            connections: 32,
            target: "h:1".into(),
        };
        let text = report.compact_json(SUMMARY_MAX_BYTES);
        assert!(text.len() <= SUMMARY_MAX_BYTES, "{}", text.len());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(v["knee_pps"], 1_234_567.0);
        assert_eq!(v["knee_p95_ms"], 12.3);
        assert_eq!(v["points_per_request"], 5000);
        let kept = v["steps"].as_array().map_or(0, Vec::len);
        assert!(kept > 10 && kept < 300, "{kept}");
        // The latest steps are kept: the last one is step 300.
        assert_eq!(v["steps"][kept - 1][0], (123_456.7f64 * 300.0).round());
        assert_eq!(v["steps"][kept - 1][5], 1);
    }
}
