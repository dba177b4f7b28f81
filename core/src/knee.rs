//! The knee: the highest offered rate the target still serves "comfortably". A step passes when
//! (1) it achieves at least 99 % of what was offered, (2) nothing was dropped (every request
//! found a free connection on time) and (3) p95 stays under a limit. The limit is the smaller
//! of an absolute threshold (250 ms) and a multiple (2.5x) of the lightest step's p95: an
//! absolute bound alone would let a fast server's latency triple before we noticed it was
//! saturating, a relative bound alone would be meaningless for a slow one. The relative bound
//! has a small floor so a sub-millisecond loopback baseline does not turn scheduler jitter into
//! a failure. This is the number the autoscaler targets, so the rules live here, pure and
//! tested, and not in the I/O code.

use std::fmt;

/// What a step must meet to count below the knee.
#[derive(Clone, Debug, PartialEq)]
pub struct Criteria {
    /// achieved / offered must be at least this (0.99).
    pub min_achieved_ratio: f64,
    /// Absolute p95 bound in ms (250).
    pub p95_max_ms: f64,
    /// p95 at most this multiple of the lightest step's p95 (2.5); 0 disables.
    pub p95_factor: f64,
    /// The relative bound is never below this many ms (10).
    pub p95_floor_ms: f64,
    /// Stop the ramp after this many failed steps in a row (2).
    pub stop_after: usize,
    /// ... or at once when a step achieves less than this share of its offered rate (0.9):
    /// the target is then clearly past saturation and higher steps only pile up queues.
    pub clear_fail_ratio: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Self {
            min_achieved_ratio: 0.99,
            p95_max_ms: 250.0,
            p95_factor: 2.5,
            p95_floor_ms: 10.0,
            stop_after: 2,
            clear_fail_ratio: 0.9,
        }
    }
}

/// The numbers of one step the rules look at.
#[derive(Clone, Debug, PartialEq)]
pub struct StepFigures {
    /// Offered points/s.
    pub offered_pps: f64,
    /// Acknowledged (2xx) points/s.
    pub achieved_pps: f64,
    /// p95 of successful requests, ms; `None` when none succeeded.
    pub p95_ms: Option<f64>,
    /// Requests that found no free connection in time.
    pub dropped: u64,
}

/// Why a step is not below the knee.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Achieved less than the required share of the offered rate.
    Rate {
        /// achieved / offered.
        ratio: f64,
    },
    /// Some requests were dropped.
    Dropped(u64),
    /// p95 above the limit.
    Latency {
        /// Measured p95, ms.
        p95_ms: f64,
        /// The limit, ms.
        limit_ms: f64,
    },
    /// No request succeeded, so there is no latency to judge.
    NoSuccess,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Rate { ratio } => write!(f, "rate {:.1}%", ratio * 100.0),
            Failure::Dropped(n) => write!(f, "dropped {n}"),
            Failure::Latency { p95_ms, limit_ms } => {
                write!(f, "p95 {p95_ms:.1}>{limit_ms:.1}ms")
            }
            Failure::NoSuccess => write!(f, "no success"),
        }
    }
}

impl Criteria {
    /// The p95 limit in ms given the lightest step's p95.
    pub fn p95_limit_ms(&self, lightest_p95_ms: Option<f64>) -> f64 {
        match lightest_p95_ms {
            Some(base) if self.p95_factor > 0.0 => self
                .p95_max_ms
                .min((base * self.p95_factor).max(self.p95_floor_ms)),
            _ => self.p95_max_ms,
        }
    }

    /// Every rule the step breaks; empty means it passes.
    pub fn failures(&self, step: &StepFigures, limit_ms: f64) -> Vec<Failure> {
        let mut out = Vec::new();
        let ratio = ratio(step);
        if ratio < self.min_achieved_ratio {
            out.push(Failure::Rate { ratio });
        }
        if step.dropped > 0 {
            out.push(Failure::Dropped(step.dropped));
        }
        match step.p95_ms {
            Some(p95) if p95 > limit_ms => out.push(Failure::Latency {
                p95_ms: p95,
                limit_ms,
            }),
            Some(_) => {}
            None => out.push(Failure::NoSuccess),
        }
        out
    }

    /// A failure so far past saturation that ramping further is pointless.
    pub fn clearly_failed(&self, step: &StepFigures) -> bool {
        ratio(step) < self.clear_fail_ratio
    }
}

fn ratio(step: &StepFigures) -> f64 {
    if step.offered_pps > 0.0 {
        step.achieved_pps / step.offered_pps
    } else {
        0.0
    }
}

/// Verdicts for a whole ramp, in step order (the lightest step first).
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The p95 limit applied to every step, ms.
    pub p95_limit_ms: f64,
    /// Per step, the rules it breaks.
    pub failures: Vec<Vec<Failure>>,
    /// Index of the knee step: the passing step with the highest offered rate.
    pub knee: Option<usize>,
}

/// Judges every step of a ramp. The lightest step is the one with the lowest offered rate.
pub fn evaluate(steps: &[StepFigures], criteria: &Criteria) -> Evaluation {
    let lightest = steps
        .iter()
        .filter(|s| s.p95_ms.is_some())
        .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
        .and_then(|s| s.p95_ms);
    let limit = criteria.p95_limit_ms(lightest);
    let failures: Vec<Vec<Failure>> = steps.iter().map(|s| criteria.failures(s, limit)).collect();
    let knee = steps
        .iter()
        .zip(&failures)
        .enumerate()
        .filter(|(_, (_, f))| f.is_empty())
        .max_by(|(_, (a, _)), (_, (b, _))| a.offered_pps.total_cmp(&b.offered_pps))
        .map(|(i, _)| i);
    Evaluation {
        p95_limit_ms: limit,
        failures,
        knee,
    }
}

/// Whether the ramp should stop after the steps seen so far: `stop_after` failures in a row,
/// or the last step failed clearly.
pub fn should_stop(steps: &[StepFigures], criteria: &Criteria) -> bool {
    let eval = evaluate(steps, criteria);
    let streak = eval
        .failures
        .iter()
        .rev()
        .take_while(|f| !f.is_empty())
        .count();
    let last_clear = steps.last().is_some_and(|s| criteria.clearly_failed(s))
        && eval.failures.last().is_some_and(|f| !f.is_empty());
    streak >= criteria.stop_after.max(1) || last_clear
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(offered: f64, achieved: f64, p95: f64, dropped: u64) -> StepFigures {
        StepFigures {
            offered_pps: offered,
            achieved_pps: achieved,
            p95_ms: Some(p95),
            dropped,
        }
    }

    #[test]
    fn knee_is_highest_passing_step() {
        let steps = vec![
            step(100.0, 100.0, 20.0, 0),
            step(200.0, 199.0, 25.0, 0),
            step(300.0, 298.0, 45.0, 0),
            step(400.0, 380.0, 45.0, 0), // 95 %: rate fails
            step(500.0, 400.0, 300.0, 7),
        ];
        let eval = evaluate(&steps, &Criteria::default());
        assert_eq!(eval.knee, Some(2));
        assert_eq!(eval.p95_limit_ms, 50.0);
        assert!(matches!(
            eval.failures[3].as_slice(),
            [Failure::Rate { .. }]
        ));
        assert_eq!(eval.failures[4].len(), 3);
    }

    #[test]
    fn relative_latency_bound() {
        // Achieved and drops are fine, but p95 more than 2.5x the lightest step's.
        let steps = vec![step(100.0, 100.0, 40.0, 0), step(200.0, 200.0, 101.0, 0)];
        let eval = evaluate(&steps, &Criteria::default());
        assert_eq!(eval.knee, Some(0));
        assert_eq!(eval.p95_limit_ms, 100.0);
        // Absolute bound wins when smaller.
        let steps = vec![step(100.0, 100.0, 200.0, 0), step(200.0, 200.0, 260.0, 0)];
        assert_eq!(evaluate(&steps, &Criteria::default()).knee, Some(0));
        // The floor keeps a sub-ms baseline from failing on jitter.
        let steps = vec![step(100.0, 100.0, 0.4, 0), step(200.0, 200.0, 3.0, 0)];
        let eval = evaluate(&steps, &Criteria::default());
        assert_eq!((eval.knee, eval.p95_limit_ms), (Some(1), 10.0));
        // Factor 0 disables the relative bound.
        let c = Criteria {
            p95_factor: 0.0,
            ..Criteria::default()
        };
        let steps = vec![step(100.0, 100.0, 1.0, 0), step(200.0, 200.0, 249.0, 0)];
        assert_eq!(evaluate(&steps, &c).knee, Some(1));
    }

    #[test]
    fn drops_and_missing_latency_fail() {
        let steps = vec![
            step(100.0, 100.0, 10.0, 0),
            step(200.0, 200.0, 10.0, 1),
            StepFigures {
                offered_pps: 300.0,
                achieved_pps: 0.0,
                p95_ms: None,
                dropped: 0,
            },
        ];
        let eval = evaluate(&steps, &Criteria::default());
        assert_eq!(eval.knee, Some(0));
        assert_eq!(eval.failures[1], vec![Failure::Dropped(1)]);
        assert!(eval.failures[2].contains(&Failure::NoSuccess));
    }

    #[test]
    fn no_knee_when_first_step_fails() {
        let steps = vec![step(100.0, 50.0, 10.0, 3), step(200.0, 60.0, 10.0, 9)];
        assert_eq!(evaluate(&steps, &Criteria::default()).knee, None);
        assert_eq!(evaluate(&[], &Criteria::default()).knee, None);
    }

    #[test]
    fn stopping_rule() {
        let c = Criteria::default();
        let ok = step(100.0, 100.0, 10.0, 0);
        let soft = step(200.0, 197.0, 10.0, 0); // fails (98.5 %) but not clearly
        let hard = step(300.0, 200.0, 10.0, 0); // 67 %: clearly
        assert!(!should_stop(std::slice::from_ref(&ok), &c));
        assert!(!should_stop(&[ok.clone(), soft.clone()], &c));
        assert!(should_stop(&[ok.clone(), soft.clone(), soft.clone()], &c));
        assert!(should_stop(&[ok.clone(), hard.clone()], &c));
        assert!(!should_stop(
            &[ok.clone(), soft.clone(), ok.clone(), soft],
            &c
        ));
        let patient = Criteria {
            stop_after: 3,
            clear_fail_ratio: 0.0,
            ..c
        };
        assert!(!should_stop(&[ok, hard.clone(), hard], &patient));
    }
}
