//! The knee search: a ramp for a target whose capacity nobody knows yet (the operator's
//! calibration of a fresh pod, a hand-run check of one pod). A linear ramp needs its range
//! guessed, and a guess a hundred times too low or too high wastes the run; the search brackets
//! the knee first and then looks closer, in a bounded number of steps:
//!
//! 1. **Bracket.** From `start`, multiply the rate by `growth` (2: double it) after every step
//!    that passes and stop at the first that fails (divide instead while the very first steps
//!    fail, down to `start / 64`). That gives the highest passing rate `lo` and the failing rate
//!    `hi = growth x lo` above it. A smaller growth overloads the target less at `hi` (it
//!    recovers sooner) at the price of more steps on the way up.
//! 2. **Refine.** After a pause (the overloaded step left a backlog the target works off), run
//!    `refine` evenly spaced rates between `lo` and `hi`, upwards, until one fails.
//! 3. **Confirm.** Run the highest rate that passed again (after another pause when the step
//!    before failed), up to `confirm` steps in all, and let the majority of its runs decide:
//!    one step near a small target's capacity passes or fails by the burst of background work
//!    that lands in it (a 300m pod's highest passing step was 22,500 points/s in one ramp and
//!    15,000-16,500 in the three after it; another time 15,000 failed once between two passes),
//!    and a knee set by one lucky step sizes every pod too large. A rate is confirmed once it
//!    passed twice and more often than it failed; a tie runs it once more; a rate that failed
//!    more often than it passed is not the knee, and the next highest that passed is confirmed
//!    in turn. When the confirmations run out, the highest rate that passed more often than it
//!    failed is the knee ([`knee_of`]).
//!
//! The knee is then within `(hi - lo) / (refine + 1)` of the truth: a sixth of it with five
//! refining steps and doubling. Stepping from `start` to `max` takes at most
//! `log(max / start) / log(growth)` bracketing steps plus `refine` plus `confirm`, which is
//! what bounds the run's length.
//!
//! Pure: the next rate is a function of the verdicts so far, so every path is unit-tested.

/// The search's settings (rates in any unit, as long as it is the same for all).
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// First rate tried.
    pub start: f64,
    /// The doubling stops here: a target that passes `max` is reported with its knee at
    /// `max` (a lower bound).
    pub max: f64,
    /// Steps between the bracket's ends.
    pub refine: usize,
    /// Factor between bracketing steps (more than 1).
    pub growth: f64,
    /// Steps that run the highest passing rate again before it counts as the knee (0: none).
    pub confirm: usize,
}

/// How far below `start` the search goes while the first steps fail: `start / 64`.
pub const FLOOR_DIVISOR: f64 = 64.0;

/// What to run next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// A step at this rate; `settle` first when it is the first refining step.
    Step { rate: f64, settle: bool },
    /// The search is over.
    Done,
}

impl Search {
    /// The next step, given the rates run so far and whether each passed (as judged when it
    /// finished).
    pub fn next(&self, history: &[(f64, bool)]) -> Next {
        let mut steps = history.iter().copied();
        let floor = self.start / FLOOR_DIVISOR;
        let growth = self.growth.max(1.01);
        let (mut lo, mut hi) = (None::<f64>, None::<f64>);
        let mut rate = self.start;
        // Bracket.
        loop {
            let Some((r, passed)) = steps.next() else {
                return Next::Step {
                    rate,
                    settle: false,
                };
            };
            if passed {
                lo = Some(r);
                if hi.is_some() {
                    break;
                }
                if r >= self.max {
                    return Next::Done;
                }
                rate = (r * growth).min(self.max);
            } else {
                hi = Some(r);
                if lo.is_some() {
                    break;
                }
                if r / growth < floor * (1.0 - 1e-9) {
                    return Next::Done;
                }
                rate = r / growth;
            }
        }
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Next::Done;
        };
        // Refine.
        for k in 1..=self.refine {
            let rate = lo + (hi - lo) * k as f64 / (self.refine + 1) as f64;
            match steps.next() {
                None => {
                    return Next::Step {
                        rate,
                        settle: k == 1,
                    }
                }
                Some((_, false)) => break,
                Some((_, true)) => {}
            }
        }
        // Confirm: the steps left are confirmations.
        if steps.count() >= self.confirm {
            return Next::Done;
        }
        match confirmed_or_next(history) {
            Some(rate) => Next::Step {
                rate,
                // The step before overloaded the target unless it passed.
                settle: history.last().is_some_and(|(_, passed)| !passed),
            },
            None => Next::Done,
        }
    }

    /// The most steps a search can take (for bounding a run's length).
    pub fn max_steps(&self) -> usize {
        let g = self.growth.max(1.01).ln();
        let up = ((self.max / self.start).ln() / g).ceil().max(0.0) as usize;
        let down = (FLOOR_DIVISOR.ln() / g).ceil() as usize;
        // Growing up to `max`, or shrinking down to the floor; then the refining steps and
        // the confirmations.
        (up.max(down) + 1)
            .saturating_add(self.refine)
            .saturating_add(self.confirm)
    }
}

/// The knee step of a run whose steps asked for `asked` rates and passed or not: the last
/// passing step of the highest rate that passed more often than it failed; `None` when no rate
/// did. One run of a rate is a majority of one.
pub fn knee_of(asked: &[f64], passed: &[bool]) -> Option<usize> {
    let steps = || asked.iter().copied().zip(passed.iter().copied());
    steps()
        .enumerate()
        .filter(|(_, (r, p))| *p && tally(steps(), *r).majority())
        .max_by(|(_, (a, _)), (_, (b, _))| a.total_cmp(b))
        .map(|(i, _)| i)
}

/// The rate to run again next: the highest that passed at least as often as it failed, unless
/// it passed twice and more often than it failed (then `None`: the knee is confirmed). `None`
/// too when no rate qualifies.
fn confirmed_or_next(history: &[(f64, bool)]) -> Option<f64> {
    let steps = || history.iter().copied();
    let (rate, runs) = steps()
        .filter(|(_, p)| *p)
        .map(|(r, _)| (r, tally(steps(), r)))
        .filter(|(_, t)| t.passed >= t.failed)
        .max_by(|(a, _), (b, _)| a.total_cmp(b))?;
    (!(runs.majority() && runs.passed >= 2)).then_some(rate)
}

/// How the runs of one rate went.
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    fn majority(&self) -> bool {
        self.passed > self.failed
    }
}

fn tally(steps: impl Iterator<Item = (f64, bool)>, rate: f64) -> Tally {
    let (mut passed, mut failed) = (0, 0);
    for (_, p) in steps.filter(|(r, _)| *r == rate) {
        if p {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    Tally { passed, failed }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a target that passes every rate up to `knee`.
    fn run(s: &Search, knee: f64) -> Vec<(f64, bool)> {
        let mut history = Vec::new();
        let mut settles = 0;
        while let Next::Step { rate, settle } = s.next(&history) {
            settles += usize::from(settle);
            history.push((rate, rate <= knee));
            assert!(history.len() <= s.max_steps(), "{history:?}");
        }
        assert!(settles <= 1 + s.confirm);
        history
    }

    fn found(history: &[(f64, bool)]) -> Option<f64> {
        history
            .iter()
            .filter(|(_, p)| *p)
            .map(|(r, _)| *r)
            .reduce(f64::max)
    }

    #[test]
    fn brackets_then_refines_within_a_sixth() {
        let s = Search {
            start: 10_000.0,
            max: 50_000_000.0,
            refine: 5,
            growth: 2.0,
            confirm: 0,
        };
        for knee in [12_345.0, 99_000.0, 250_000.0, 1_000_000.0, 3_700_000.0] {
            let h = run(&s, knee);
            let k = found(&h).unwrap_or(0.0);
            assert!(
                k <= knee && k >= knee * (1.0 - 1.0 / 6.0) - 1.0,
                "{knee}: {k} {h:?}"
            );
        }
        let h = run(&s, 250_000.0);
        let rates: Vec<f64> = h.iter().map(|(r, _)| *r).collect();
        // 10k, 20k, ..., 160k pass, 320k fails; then 160k + 160k/6 x k.
        assert_eq!(&rates[..6], &[10e3, 20e3, 40e3, 80e3, 160e3, 320e3]);
        assert!((rates[6] - 186_666.67).abs() < 1.0, "{rates:?}");
        // The refinement stops at its first failure.
        assert_eq!(h.iter().filter(|(_, p)| !p).count(), 2);
    }

    #[test]
    fn a_slow_target_is_found_by_halving() {
        let s = Search {
            start: 10_000.0,
            max: 1e9,
            refine: 2,
            growth: 2.0,
            confirm: 0,
        };
        let h = run(&s, 1_500.0);
        let rates: Vec<f64> = h.iter().take(4).map(|(r, _)| *r).collect();
        assert_eq!(rates, [10e3, 5e3, 2.5e3, 1.25e3]);
        assert_eq!(found(&h), Some(1_250.0));
        // Nothing passes at all: the search gives up at start / 64.
        let h = run(&s, 1.0);
        assert_eq!(h.len(), 7);
        assert_eq!(found(&h), None);
        assert!((h[6].0 - 10_000.0 / 64.0).abs() < 1e-6);
    }

    #[test]
    fn a_target_faster_than_max_stops_at_max() {
        let s = Search {
            start: 1_000.0,
            max: 5_000.0,
            refine: 3,
            growth: 2.0,
            confirm: 0,
        };
        let h = run(&s, 1e12);
        let rates: Vec<f64> = h.iter().map(|(r, _)| *r).collect();
        assert_eq!(rates, [1e3, 2e3, 4e3, 5e3]);
        assert_eq!(
            s.next(&[]),
            Next::Step {
                rate: 1e3,
                settle: false
            }
        );
    }

    #[test]
    fn a_gentler_growth_overloads_less_and_still_finds_the_knee() {
        let s = Search {
            start: 10_000.0,
            max: 50_000_000.0,
            refine: 4,
            growth: 1.5,
            confirm: 0,
        };
        for knee in [13_000.0, 150_000.0, 2_000_000.0] {
            let h = run(&s, knee);
            let k = found(&h).unwrap_or(0.0);
            assert!(
                k <= knee && k >= knee * (1.0 - 0.5 / 5.0) - 1.0,
                "{knee}: {k} {h:?}"
            );
            // The one bracketing step that failed was at most 1.5 x the knee.
            let over = h
                .iter()
                .filter(|(_, p)| !p)
                .map(|(r, _)| *r)
                .reduce(f64::max);
            assert!(over.unwrap_or(0.0) <= 1.5 * knee + 1.0, "{h:?}");
        }
    }

    #[test]
    fn the_first_refining_step_settles() {
        let s = Search {
            start: 1.0,
            max: 100.0,
            refine: 1,
            growth: 2.0,
            confirm: 0,
        };
        assert_eq!(
            s.next(&[(1.0, true), (2.0, false)]),
            Next::Step {
                rate: 1.5,
                settle: true
            }
        );
        assert_eq!(
            s.next(&[(1.0, true), (2.0, false), (1.5, true)]),
            Next::Done
        );
    }

    /// A noisy target: passes every rate up to `knee`, and `lucky` once more.
    fn run_noisy(s: &Search, knee: f64, lucky: f64) -> Vec<(f64, bool)> {
        let mut history: Vec<(f64, bool)> = Vec::new();
        while let Next::Step { rate, .. } = s.next(&history) {
            let first_time = !history.iter().any(|(r, _)| *r == rate);
            history.push((rate, rate <= knee || (rate == lucky && first_time)));
            assert!(history.len() <= s.max_steps(), "{history:?}");
        }
        history
    }

    fn knee(history: &[(f64, bool)]) -> Option<f64> {
        let (asked, passed): (Vec<f64>, Vec<bool>) = history.iter().copied().unzip();
        knee_of(&asked, &passed).map(|i| asked[i])
    }

    /// One lucky pass above the target's capacity is the knee without confirmation; run
    /// again, it fails, a third run breaks the tie against it, and the next highest rate
    /// (confirmed in turn) is the knee.
    #[test]
    fn a_lucky_step_loses_its_confirmation_and_the_one_below_is_the_knee() {
        let mut s = Search {
            start: 1_000.0,
            max: 1e9,
            refine: 4,
            growth: 1.5,
            confirm: 0,
        };
        // 1,000, 1,500, 2,250 pass; 3,375 fails; refining 2,475, 2,700, 2,925 pass (the last by
        // luck), 3,150 fails.
        let h = run_noisy(&s, 2_800.0, 2_925.0);
        assert_eq!(knee(&h), Some(2_925.0), "{h:?}");
        s.confirm = 3;
        let h = run_noisy(&s, 2_800.0, 2_925.0);
        let tail = &h[h.len() - 3..];
        assert_eq!(
            tail,
            [(2_925.0, false), (2_925.0, false), (2_700.0, true)],
            "{h:?}"
        );
        assert_eq!(knee(&h), Some(2_700.0));
        // Each confirmation after a failed step waits for the target to recover.
        for (cut, rate) in [(4, 2_925.0), (3, 2_925.0), (2, 2_700.0)] {
            assert_eq!(
                s.next(&h[..h.len() - cut + 1]),
                Next::Step { rate, settle: true },
                "{cut}"
            );
        }
    }

    /// One unlucky run of the knee is outvoted: a tie runs it a third time.
    #[test]
    fn an_unlucky_confirmation_is_outvoted() {
        let s = Search {
            start: 1.0,
            max: 100.0,
            refine: 1,
            growth: 2.0,
            confirm: 3,
        };
        let h = [
            (1.0, true),
            (2.0, true),
            (4.0, false),
            (3.0, true),
            (3.0, false),
        ];
        assert_eq!(
            s.next(&h),
            Next::Step {
                rate: 3.0,
                settle: true
            }
        );
        assert_eq!(knee(&h), Some(2.0));
        let h = [h.as_slice(), &[(3.0, true)]].concat();
        assert_eq!(s.next(&h), Next::Done);
        assert_eq!(knee(&h), Some(3.0));
    }

    /// A knee that holds is run once more and the search ends; a steady target's knee is
    /// the same with confirmation as without.
    #[test]
    fn a_steady_knee_is_confirmed_once() {
        let s = |confirm| Search {
            start: 10_000.0,
            max: 50_000_000.0,
            refine: 4,
            growth: 1.5,
            confirm,
        };
        for k in [13_000.0, 150_000.0, 2_000_000.0] {
            let plain = run(&s(0), k);
            let confirmed = run(&s(3), k);
            assert_eq!(confirmed.len(), plain.len() + 1, "{confirmed:?}");
            assert_eq!(knee(&confirmed), knee(&plain));
            assert_eq!(confirmed.last().map(|(r, _)| Some(*r)), Some(knee(&plain)));
        }
    }

    /// Confirmations never run past `confirm`, however they go, and a rate that failed as
    /// often as it passed is not the knee.
    #[test]
    fn confirmations_are_bounded_and_a_tie_is_not_the_knee() {
        let s = Search {
            start: 1.0,
            max: 100.0,
            refine: 1,
            growth: 2.0,
            confirm: 2,
        };
        let h = [(1.0, true), (2.0, true), (4.0, false), (3.0, true)];
        assert_eq!(
            s.next(&h),
            Next::Step {
                rate: 3.0,
                settle: false
            }
        );
        let h = [h.as_slice(), &[(3.0, false), (3.0, true)]].concat();
        assert_eq!(s.next(&h), Next::Done);
        assert_eq!(knee(&h), Some(3.0));
        let h = [&h[..5], &[(3.0, false)]].concat();
        assert_eq!(s.next(&h), Next::Done);
        assert_eq!(knee(&h), Some(2.0));
        assert_eq!(knee_of(&[5.0, 5.0], &[false, true]), None);
        assert_eq!(knee_of(&[5.0, 5.0, 5.0], &[false, true, true]), Some(2));
    }
}
