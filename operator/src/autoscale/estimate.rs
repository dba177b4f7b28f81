//! A pod's knee, estimated: calibration measures it once (a ramp of `sluice-load` against a
//! scratch pod); live windows move it. A window in which a pod kept up at rate R says the knee
//! is at least R; a window in which it fell behind at R says the knee is below R. Up, the
//! estimate moves a quarter of the way to R per window ([`RAISE_SHARE`]); down, at once.
//!
//! Old evidence counts less: with age the knee returns to its anchor, the calibration's knee
//! (without a calibration, the highest the live estimate has been). From above slowly (half the
//! gap per `half_life_s`, an hour): a pod once seen to keep up at more needs traffic to show it
//! again. From below quickly (half the gap per `recover_half_life_s`, five minutes): a pod that
//! fell behind under one load is never offered as much again once the knee spreads the load over
//! more pods, so only time can bring it back. Before, the lower bound sank towards zero with
//! age: under steady traffic it settled at what each pod carried, the forecast then asked for
//! more pods, each carried less, and the knee sank after it, adding pods hour after hour; and in
//! a CI run of the e2e mission the live knee was 5,100 points/s (calibrated: about 14,900) when
//! the load fell to 4,950, and two pods stayed for the 300 s the scenario waits.
//! A pod that really got slower falls behind again and takes the knee down at once.
//!
//! Latency alone, at well under the knee, says nothing about capacity: a pod at a fifth of its
//! knee whose p95 jumps for one window is merging parts or working off the backlog of a busier
//! minute, and taking its knee down to a fifth would keep pods it does not need. Such a window
//! is left out ([`Exclusion::Unloaded`]); falling behind on throughput (less acknowledged,
//! refusals, a growing backlog) counts at any rate, but far under the knee only once the same
//! pod does it for [`CONFIRM_WINDOWS`] windows in a row ([`Exclusion::Unconfirmed`] until then).

use std::collections::HashMap;

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

/// How many windows in a row a pod must fall behind on throughput, at under `loaded_share` of
/// the knee, before that counts. One such window takes the knee down to a fraction of itself
/// (on 2026-11-26 a tenth of a window's points read as unanswered, a counting race since fixed,
/// took it from 13,000 to 1,070 points/s), and a tenant at that knee keeps pods it does not
/// need until the knee recovers. A pod whose capacity really fell keeps falling behind (three
/// windows are 30 s at the autoscaler's 10 s tick), and until then the decision's own distress
/// rules (unacknowledged points, a growing backlog) add pods whatever the knee says.
pub const CONFIRM_WINDOWS: u32 = 3;

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
    /// Behind on throughput at under `loaded_share` of the knee, fewer than
    /// [`CONFIRM_WINDOWS`] windows in a row.
    Unconfirmed,
}

/// One pod's figures between two scrapes of its `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// The pod (its name): a failure far under the knee counts only when the same pod repeats it.
    pub pod: String,
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
    /// Above its anchor, the knee loses half the gap to it per this long (an hour).
    pub half_life_s: f64,
    /// Below its anchor, the knee recovers half the gap to it per this long (five minutes).
    pub recover_half_life_s: f64,
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
            recover_half_life_s: 300.0,
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
    /// What the knee returns to with age: the calibration's knee, or without one the highest
    /// lower bound live windows have set.
    anchor: Option<Bound>,
    /// Per pod, how many windows in a row it fell behind far under the knee.
    unloaded_behind: HashMap<String, u32>,
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
            anchor: None,
            unloaded_behind: HashMap::new(),
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
            anchor: Some(Bound {
                pps: knee_pps,
                at_s,
                p95_ms,
                source: Source::Calibration,
            }),
            unloaded_behind: HashMap::new(),
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
        if kept_up {
            self.unloaded_behind.remove(&w.pod);
        } else if unloaded {
            let n = self.unloaded_behind.entry(w.pod.clone()).or_insert(0);
            *n += 1;
            if *n < CONFIRM_WINDOWS {
                return Verdict::Ignored(Exclusion::Unconfirmed);
            }
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
            // Without a calibration the highest knee live traffic has shown is the anchor.
            if let Some(l) = self.lower.filter(|l| {
                self.anchor
                    .is_none_or(|a| a.source == Source::Live && l.pps > a.pps)
            }) {
                self.anchor = Some(l);
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

    /// The lower bound, aged: back towards the anchor.
    fn lower_at(&self, now_s: f64, rules: &Rules) -> Option<f64> {
        let b = self.lower?;
        Some(match self.anchor {
            Some(a) => towards(b.pps, a.pps, age(b, now_s), rules),
            None => b.pps,
        })
    }

    /// The upper bound, aged: the knee it allows (90 % of it) goes back towards the anchor
    /// like a lower bound; above the anchor (or without one) it doubles per `half_life_s`.
    fn upper_at(&self, now_s: f64, rules: &Rules) -> Option<f64> {
        let b = self.upper?;
        let age = age(b, now_s);
        Some(match self.anchor {
            Some(a) if 0.9 * b.pps < a.pps => towards(0.9 * b.pps, a.pps, age, rules) / 0.9,
            _ => b.pps * 2f64.powf(age / rules.half_life_s),
        })
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

/// `pps` after `age_s` seconds of returning to `anchor`: from above at `half_life_s`, from
/// below at `recover_half_life_s`.
fn towards(pps: f64, anchor: f64, age_s: f64, rules: &Rules) -> f64 {
    let half_life = if pps > anchor {
        rules.half_life_s
    } else {
        rules.recover_half_life_s
    };
    anchor + (pps - anchor) * 0.5f64.powf(age_s / half_life)
}

#[cfg(test)]
mod tests;
