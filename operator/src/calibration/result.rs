//! What the calibration pod reports: `sluice-load --summary /dev/termination-log` leaves its
//! run in the load container's termination message (at most 4 KiB), which the kubelet puts in
//! the pod's status, so the operator needs no access to logs.

use serde::Deserialize;

/// The summary as sluice-load writes it (`Report::compact_json`).
#[derive(Debug, Deserialize)]
struct Summary {
    knee_pps: Option<f64>,
    #[serde(default)]
    knee_p95_ms: Option<f64>,
    #[serde(default)]
    p95_limit_ms: Option<f64>,
    #[serde(default)]
    steps: Vec<Step>,
}

/// `[offered_pps, achieved_pps, p95_ms, dropped, errors, pass]`: one step of the summary.
type Step = (f64, f64, Option<f64>, u64, u64, u8);

/// A ramp that found a knee.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub knee_pps: f64,
    pub p95_ms: Option<f64>,
    /// The ramp in one line, for the status and the Event.
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultError {
    #[error("the termination message is not the load generator's summary ({0})")]
    NotSummary(String),
    #[error("no step met the knee rule (p95 limit {limit}); {first}")]
    NoKnee { limit: String, first: String },
}

fn ms(v: Option<f64>) -> String {
    v.map_or("none".into(), |v| format!("{v:.0} ms"))
}

/// Each step as `rate/p95 ok|failed`, in the order it ran: the knee alone does not say how
/// close the steps around it came (a step near a throttled pod's capacity passes by chance).
fn steps_in_short(steps: &[Step]) -> String {
    let each: Vec<String> = steps
        .iter()
        .map(|(offered, _, p95, _, _, pass)| {
            let p95 = p95.map_or("-".into(), |v| format!("{v:.0}"));
            let verdict = if *pass == 1 { "ok" } else { "failed" };
            format!("{offered:.0}/{p95} {verdict}")
        })
        .collect();
    format!("steps (points/s / p95 ms): {}", each.join(", "))
}

/// Reads the load container's termination message.
pub fn parse(message: &str) -> Result<Found, ResultError> {
    let s: Summary = serde_json::from_str(message.trim()).map_err(|e| {
        let start: String = message.trim().chars().take(120).collect();
        ResultError::NotSummary(format!("{e}: {start:?}"))
    })?;
    let Some(knee) = s.knee_pps else {
        let first = s.steps.first().map_or("no steps ran".into(), |f| {
            format!(
                "the lightest step offered {:.0} points/s, acknowledged {:.0}, p95 {}, {} dropped, {} errors",
                f.0,
                f.1,
                ms(f.2),
                f.3,
                f.4
            )
        });
        return Err(ResultError::NoKnee {
            limit: ms(s.p95_limit_ms),
            first,
        });
    };
    let (lo, hi) = s.steps.iter().fold((f64::INFINITY, 0f64), |(lo, hi), st| {
        (lo.min(st.0), hi.max(st.0))
    });
    let summary = format!(
        "{} steps from {:.0} to {:.0} points/s; the highest that kept up: {:.0} (p95 {}, limit {}); {}",
        s.steps.len(),
        if lo.is_finite() { lo } else { 0.0 },
        hi,
        knee,
        ms(s.knee_p95_ms),
        ms(s.p95_limit_ms),
        steps_in_short(&s.steps),
    );
    Ok(Found {
        knee_pps: knee,
        p95_ms: s.knee_p95_ms,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generators_summary_gives_the_knee() {
        let f = parse(
            r#"{"knee_pps":160000.0,"knee_p95_ms":41.2,"p95_limit_ms":103.0,"mode":"search","steps":[[10000.0,10000.0,40.9,0,0,1],[320000.0,250000.0,900.0,3,0,0],[160000.0,160000.0,41.2,0,0,1]]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.knee_pps, 160_000.0);
        assert_eq!(f.p95_ms, Some(41.2));
        assert_eq!(
            f.summary,
            "3 steps from 10000 to 320000 points/s; the highest that kept up: 160000 (p95 41 ms, limit 103 ms); steps (points/s / p95 ms): 10000/41 ok, 320000/900 failed, 160000/41 ok"
        );
    }

    #[test]
    fn no_knee_or_no_summary_is_an_error_that_says_what_it_saw() {
        let e =
            parse(r#"{"knee_pps":null,"p95_limit_ms":250.0,"steps":[[10000.0,900.0,null,5,5,0]]}"#);
        assert_eq!(
            e,
            Err(ResultError::NoKnee {
                limit: "250 ms".into(),
                first: "the lightest step offered 10000 points/s, acknowledged 900, p95 none, 5 dropped, 5 errors".into()
            })
        );
        let e = parse("sluice-load: cannot connect").map_err(|e| e.to_string());
        assert!(
            e.as_ref()
                .is_err_and(|m| m.contains("not the load generator's summary")),
            "{e:?}"
        );
    }
}
