//! A pod's knee, estimated: calibration measures it once (a ramp of `sluice-load` against a
//! scratch pod); live windows move it. A window in which a pod kept up at rate R says the knee
//! is at least R; a window in which it fell behind at R says the knee is below R. Up, the
//! estimate moves a quarter of the way to R per window ([`RAISE_SHARE`]); down, at once. Old evidence
//! counts less: each bound loosens with age (a lower bound sinks, an upper bound rises, by half
//! and double per `half_life_s`), so a pod whose capacity changed (a noisy neighbour left, a
//! disk slowed) is measured again by its traffic.
//!
//! Latency alone, at well under the knee, says nothing about capacity: a pod at a fifth of its
//! knee whose p95 jumps for one window is merging parts or working off the backlog of a busier
//! minute, and taking its knee down to a fifth would keep pods it does not need. Such a window
//! is left out ([`Exclusion::Unloaded`]); falling behind on throughput (less acknowledged,
//! refusals, a growing backlog) counts at any rate.

use sluice_core::knee::{Criteria, Failure, StepFigures};

/// How far towards a higher rate kept up one window moves the lower bound. A pod throttled to a
/// fraction of a CPU keeps up for a window now and then well above what it sustains: it got
/// more than its share of the connections for a few seconds, or no merge landed in them. In
/// the e2e mission one such window raised the knee from 16,700 to 21,600 points/s, the tenant
/// went from 4 pods to 3 under steady load and back to 4 a minute later, when p95 passed 1.6 s.
/// A quarter of the way per window takes three windows of keeping up (30 s) to cover most of
/// the gap, so one lucky window moves the knee a little and a real change of capacity still
/// shows within a minute. Falling behind lowers the knee at once.
pub const RAISE_SHARE: f64 = 0.25;

/// Why a window says nothing about the knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    /// Started recently: caches, pre-touched memory and the WAL replay are still settling.
    Warming,
    /// The tenant is settling after a scale-down: the pod that received the leaving pod's
    /// data merges it and answers slowly for a while.
    Settling,
    /// Leaving the tenant: it refuses writes on purpose.
    Draining,
    /// A counter went backwards: the process restarted inside the window.
    Restarted,
    /// Too little traffic to tell anything (below `min_offered_pps`).
    Idle,
    /// p95 over the bound, nothing else wrong, at under `loaded_share` of the knee: not a
    /// capacity signal.
    Unloaded,
}

/// One pod's figures between two scrapes of its `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// End of the window, seconds on any steady clock.
    pub end_s: f64,
    /// Points offered per second (acknowledged and refused).
    pub offered_pps: f64,
    /// Points answered per second: acknowledged, or rejected for what they are (a client's
    /// bad lines say nothing of the pod's capacity).
    pub acked_pps: f64,
    /// p95 write latency from the histogram's bucket deltas, ms; `None` without requests.
    pub p95_ms: Option<f64>,
    /// Requests refused for lack of room (503): the window's "dropped".
    pub refused: u64,
    /// How fast the WAL backlog grew, bytes per second (negative: it shrank).
    pub backlog_slope: f64,
    pub excluded: Option<Exclusion>,
}

/// What a window is judged against.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// The knee rule; its p95 bound is the tenant's `p95Target` (`p95_max_ms`).
    pub criteria: Criteria,
    /// A backlog growing faster than this (bytes/s) means the pod is falling behind.
    pub max_backlog_slope: f64,
    /// Windows with less traffic say nothing.
    pub min_offered_pps: f64,
    /// A window slower than the bound only in latency counts only at this share of the knee
    /// or more (0.5).
    pub loaded_share: f64,
    pub half_life_s: f64,
}

impl Rules {
    pub fn new(p95_target_ms: f64) -> Self {
        Self {
            criteria: Criteria {
                p95_max_ms: p95_target_ms,
                // Live traffic has no lightest step to compare with: the absolute bound only.
                p95_factor: 0.0,
                ..Criteria::default()
            },
            max_backlog_slope: 1_000_000.0,
            min_offered_pps: 1_000.0,
            loaded_share: 0.5,
            half_life_s: 3_600.0,
        }
    }
}

/// Where the current estimate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Calibration,
    Live,
}

/// A bound, when it was last set, the p95 seen then, and what set it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bound {
    pps: f64,
    at_s: f64,
    p95_ms: Option<f64>,
    source: Source,
}

/// What the knee rests on at a moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// When the bound was set (seconds on the estimate's clock).
    pub at_s: f64,
    /// p95 where the pods kept up (only a lower bound has one).
    pub p95_ms: Option<f64>,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    lower: Option<Bound>,
    upper: Option<Bound>,
}

/// What one window did to the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ignored(Exclusion),
    KeptUp,
    FellBehind,
}

impl Estimate {
    pub fn unknown() -> Self {
        Self {
            lower: None,
            upper: None,
        }
    }

    /// A calibration's knee (and p95 there), measured at `at_s`: it replaces whatever live
    /// windows said.
    pub fn calibrated(knee_pps: f64, p95_ms: Option<f64>, at_s: f64) -> Self {
        Self {
            lower: Some(Bound {
                pps: knee_pps,
                at_s,
                p95_ms,
                source: Source::Calibration,
            }),
            upper: None,
        }
    }

    /// Moves the bounds by one window of one pod.
    pub fn observe(&mut self, w: &Window, rules: &Rules) -> Verdict {
        if let Some(e) = w.excluded {
            return Verdict::Ignored(e);
        }
        if w.offered_pps < rules.min_offered_pps {
            return Verdict::Ignored(Exclusion::Idle);
        }
        let step = StepFigures {
            offered_pps: w.offered_pps,
            achieved_pps: w.acked_pps,
            p95_ms: w.p95_ms,
            dropped: w.refused,
        };
        let limit = rules.criteria.p95_limit_ms(None);
        let failures = rules.criteria.failures(&step, limit);
        let backlog_ok = w.backlog_slope <= rules.max_backlog_slope;
        let kept_up = failures.is_empty() && backlog_ok;
        let latency_only = backlog_ok
            && !failures.is_empty()
            && failures
                .iter()
                .all(|f| matches!(f, Failure::Latency { .. }));
        let unloaded = self
            .knee(w.end_s, rules)
            .is_some_and(|k| w.offered_pps < rules.loaded_share * k);
        if latency_only && unloaded {
            return Verdict::Ignored(Exclusion::Unloaded);
        }
        let now = Bound {
            pps: w.offered_pps,
            at_s: w.end_s,
            p95_ms: w.p95_ms,
            source: Source::Live,
        };
        if kept_up {
            match self.lower_at(w.end_s, rules) {
                None => self.lower = Some(now),
                Some(l) if now.pps > l => {
                    self.lower = Some(Bound {
                        pps: l + RAISE_SHARE * (now.pps - l),
                        ..now
                    })
                }
                Some(_) => {}
            }
            // Keeping up above the upper bound proves that bound wrong.
            if self.upper_at(w.end_s, rules).is_some_and(|u| now.pps >= u) {
                self.upper = None;
            }
            Verdict::KeptUp
        } else {
            if self.upper_at(w.end_s, rules).is_none_or(|u| now.pps <= u) {
                self.upper = Some(now);
            }
            // Falling behind below the lower bound proves that bound wrong.
            if self.lower_at(w.end_s, rules).is_some_and(|l| now.pps <= l) {
                self.lower = Some(Bound {
                    pps: now.pps * 0.9,
                    at_s: w.end_s,
                    p95_ms: None,
                    source: Source::Live,
                });
            }
            Verdict::FellBehind
        }
    }

    fn lower_at(&self, now_s: f64, rules: &Rules) -> Option<f64> {
        self.lower
            .map(|b| b.pps * 0.5f64.powf(age(b, now_s) / rules.half_life_s))
    }

    fn upper_at(&self, now_s: f64, rules: &Rules) -> Option<f64> {
        self.upper
            .map(|b| b.pps * 2f64.powf(age(b, now_s) / rules.half_life_s))
    }

    /// The knee at `now_s`: the (aged) lower bound, what a pod is known to sustain, kept
    /// below the upper bound; with only an upper bound, 90 % of it.
    pub fn knee(&self, now_s: f64, rules: &Rules) -> Option<f64> {
        match (self.lower_at(now_s, rules), self.upper_at(now_s, rules)) {
            (Some(l), Some(u)) => Some(l.min(u * 0.9)),
            (Some(l), None) => Some(l),
            (None, Some(u)) => Some(u * 0.9),
            (None, None) => None,
        }
    }
}

impl Estimate {
    /// What the knee at `now_s` rests on: the bound that sets it.
    pub fn evidence(&self, now_s: f64, rules: &Rules) -> Option<Evidence> {
        let from_lower = match (self.lower_at(now_s, rules), self.upper_at(now_s, rules)) {
            (Some(l), Some(u)) => l <= u * 0.9,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let b = if from_lower { self.lower } else { self.upper }?;
        Some(Evidence {
            at_s: b.at_s,
            p95_ms: b.p95_ms.filter(|_| from_lower),
            source: b.source,
        })
    }
}

fn age(b: Bound, now_s: f64) -> f64 {
    (now_s - b.at_s).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(end_s: f64, offered: f64, acked: f64, p95: f64) -> Window {
        Window {
            end_s,
            offered_pps: offered,
            acked_pps: acked,
            p95_ms: Some(p95),
            refused: 0,
            backlog_slope: 0.0,
            excluded: None,
        }
    }

    #[test]
    fn keeping_up_raises_the_knee_and_falling_behind_caps_it() {
        let rules = Rules::new(100.0);
        let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
        assert_eq!(e.knee(0.0, &rules), Some(1_000_000.0));
        assert_eq!(
            e.observe(&window(10.0, 1_500_000.0, 1_500_000.0, 30.0), &rules),
            Verdict::KeptUp
        );
        // A quarter of the way from the (aged) calibration to 1.5 M.
        let aged = 1_000_000.0 * 0.5f64.powf(10.0 / 3_600.0);
        let raised = aged + 0.25 * (1_500_000.0 - aged);
        assert_eq!(e.knee(10.0, &rules), Some(raised));
        assert_eq!(
            e.evidence(10.0, &rules),
            Some(Evidence {
                at_s: 10.0,
                p95_ms: Some(30.0),
                source: Source::Live
            })
        );
        // Behind at 2 M: the knee stays under 90 % of it.
        assert_eq!(
            e.observe(&window(20.0, 2_000_000.0, 1_700_000.0, 400.0), &rules),
            Verdict::FellBehind
        );
        let k = e.knee(20.0, &rules).unwrap();
        assert!(k > 1_120_000.0 && k <= 1_800_000.0, "{k}");
        // p95 over the target alone is falling behind too.
        let mut e = Estimate::unknown();
        assert_eq!(
            e.observe(&window(1.0, 500_000.0, 500_000.0, 150.0), &rules),
            Verdict::FellBehind
        );
        assert_eq!(e.knee(1.0, &rules), Some(450_000.0));
        // Only an upper bound: no p95 "at the knee".
        assert_eq!(
            e.evidence(1.0, &rules),
            Some(Evidence {
                at_s: 1.0,
                p95_ms: None,
                source: Source::Live
            })
        );
        assert_eq!(Estimate::unknown().evidence(1.0, &rules), None);
    }

    #[test]
    fn a_backlog_that_grows_or_refusals_mean_behind() {
        let rules = Rules::new(100.0);
        let mut e = Estimate::unknown();
        let mut w = window(1.0, 500_000.0, 500_000.0, 20.0);
        w.backlog_slope = 50_000_000.0;
        assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
        let mut w = window(2.0, 400_000.0, 400_000.0, 20.0);
        w.refused = 3;
        assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
    }

    #[test]
    fn excluded_and_idle_windows_say_nothing() {
        let rules = Rules::new(100.0);
        let mut e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
        for x in [
            Exclusion::Warming,
            Exclusion::Settling,
            Exclusion::Draining,
            Exclusion::Restarted,
        ] {
            let mut w = window(1.0, 5_000_000.0, 10.0, 9_000.0);
            w.excluded = Some(x);
            assert_eq!(e.observe(&w, &rules), Verdict::Ignored(x));
        }
        assert_eq!(
            e.observe(&window(1.0, 10.0, 0.0, 900.0), &rules),
            Verdict::Ignored(Exclusion::Idle)
        );
        assert_eq!(e.knee(0.0, &rules), Some(1_000_000.0));
        assert_eq!(
            e.evidence(5.0, &rules),
            Some(Evidence {
                at_s: 0.0,
                p95_ms: Some(30.0),
                source: Source::Calibration
            })
        );
        // Keeping up below the calibrated knee says nothing new: it stays the calibration's.
        e.observe(&window(6.0, 400_000.0, 400_000.0, 20.0), &rules);
        let aged = 1_000_000.0 * 0.5f64.powf(6.0 / 3_600.0);
        assert_eq!(e.knee(6.0, &rules), Some(aged));
        assert_eq!(
            e.evidence(6.0, &rules).map(|v| v.source),
            Some(Source::Calibration)
        );
    }

    #[test]
    fn latency_alone_far_under_the_knee_is_left_out() {
        let rules = Rules::new(500.0);
        let mut e = Estimate::calibrated(14_000.0, Some(300.0), 0.0);
        // A fifth of the knee, p95 1.6 s, everything acknowledged: a merge or a backlog, not
        // capacity. The knee stays.
        assert_eq!(
            e.observe(&window(10.0, 1_200.0, 1_200.0, 1_638.0), &rules),
            Verdict::Ignored(Exclusion::Unloaded)
        );
        assert!(e.knee(10.0, &rules).is_some_and(|k| k > 13_900.0));
        // The same at two thirds of the knee counts.
        assert_eq!(
            e.observe(&window(20.0, 9_000.0, 9_000.0, 1_638.0), &rules),
            Verdict::FellBehind
        );
        assert!(e.knee(20.0, &rules).is_some_and(|k| k <= 8_100.0 + 1.0));
        // Falling behind on throughput counts at any rate.
        let mut e = Estimate::calibrated(14_000.0, None, 0.0);
        assert_eq!(
            e.observe(&window(10.0, 1_200.0, 1_000.0, 1_638.0), &rules),
            Verdict::FellBehind
        );
        let mut w = window(11.0, 1_200.0, 1_200.0, 20.0);
        w.backlog_slope = 5_000_000.0;
        let mut e = Estimate::calibrated(14_000.0, None, 0.0);
        assert_eq!(e.observe(&w, &rules), Verdict::FellBehind);
    }

    #[test]
    fn evidence_ages() {
        let rules = Rules::new(100.0);
        let e = Estimate::calibrated(1_000_000.0, Some(30.0), 0.0);
        let after_an_hour = e.knee(3_600.0, &rules).unwrap();
        assert!((after_an_hour - 500_000.0).abs() < 1.0, "{after_an_hour}");
        // Fresh windows near the old knee restore it, a quarter of the gap at a time.
        let mut e = e;
        e.observe(&window(3_600.0, 950_000.0, 950_000.0, 20.0), &rules);
        assert_eq!(e.knee(3_600.0, &rules), Some(612_500.0));
        for i in 1..=8 {
            let t = 3_600.0 + 10.0 * f64::from(i);
            e.observe(&window(t, 950_000.0, 950_000.0, 20.0), &rules);
        }
        let k = e.knee(3_680.0, &rules).unwrap();
        assert!(k > 900_000.0 && k < 950_000.0, "{k}");
    }

    /// The e2e mission's steady load: 40,700 points/s over 4 pods of a knee of 16,700, and one
    /// pod that kept up at 21,600 for a window (more than its share of the connections). One
    /// window moves the knee a little; only windows that keep coming take it all the way.
    #[test]
    fn one_lucky_window_moves_the_knee_a_quarter_of_the_way() {
        let rules = Rules::new(500.0);
        let mut e = Estimate::calibrated(16_700.0, Some(400.0), 0.0);
        e.observe(&window(10.0, 21_600.0, 21_600.0, 410.0), &rules);
        let once = e.knee(10.0, &rules).unwrap();
        assert!((17_900.0..18_000.0).contains(&once), "{once}");
        // Per pod at 70 % of that knee, 40,700 points/s still needs 4 pods.
        assert_eq!((40_700.0 / (once * 0.7)).ceil(), 4.0);
        for i in 2..=12 {
            e.observe(
                &window(10.0 * f64::from(i), 21_600.0, 21_600.0, 410.0),
                &rules,
            );
        }
        let sustained = e.knee(120.0, &rules).unwrap();
        assert!(sustained > 21_300.0, "{sustained}");
        // Falling behind brings it down at once.
        e.observe(&window(130.0, 21_600.0, 20_000.0, 1_638.0), &rules);
        assert!(e.knee(130.0, &rules).unwrap() <= 0.9 * 21_600.0 + 1.0);
    }
}
