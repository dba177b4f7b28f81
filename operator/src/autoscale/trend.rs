//! How fast the offered load is rising, so a scale-up can look ahead: a pod added now carries
//! load only after the next decision and its start-up (its volume, its first scrape), and on
//! a rising load the rate it will meet then is higher than the one measured now. Without the
//! look-ahead a ramp that crossed a pod's knee within one sampling interval kept p95 over its
//! target for the interval, the start-up and the backlog's drain together.
//!
//! Only a rise seen in two windows in a row counts, and only the smaller of the two: a single
//! jump (a pod's first window, a burst) or noise that rises once and falls back adds nothing.

use std::collections::VecDeque;

/// The last three observations of the tenant's offered rate: two windows' rises.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trend {
    recent: VecDeque<(f64, f64)>,
}

impl Trend {
    /// Remembers the tenant's offered rate (points/s) at `now_s`.
    pub fn record(&mut self, now_s: f64, offered_pps: f64) {
        if self.recent.back().is_some_and(|(t, _)| now_s <= *t) {
            // A clock that did not move (two decisions in one tick) keeps the later figure.
            self.recent.pop_back();
        }
        self.recent.push_back((now_s, offered_pps));
        while self.recent.len() > 3 {
            self.recent.pop_front();
        }
    }

    /// The rise of the offered rate in points/s per second: the smaller of the last two
    /// windows' rises when both rose, else 0.
    pub fn rise_per_s(&self) -> f64 {
        let (Some(&a), Some(&b), Some(&c)) =
            (self.recent.front(), self.recent.get(1), self.recent.get(2))
        else {
            return 0.0;
        };
        let slope = |(t0, r0): (f64, f64), (t1, r1): (f64, f64)| (r1 - r0) / (t1 - t0);
        slope(a, b).min(slope(b, c)).max(0.0)
    }

    /// The offered rate `lead_s` seconds from the last observation if the rise goes on: never
    /// below the last observation.
    pub fn ahead(&self, lead_s: f64) -> Option<f64> {
        let (_, now) = *self.recent.back()?;
        Some(now + self.rise_per_s() * lead_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trend(points: &[(f64, f64)]) -> Trend {
        let mut t = Trend::default();
        for &(s, r) in points {
            t.record(s, r);
        }
        t
    }

    #[test]
    fn a_steady_ramp_is_extrapolated() {
        let t = trend(&[(0.0, 1_000.0), (10.0, 2_000.0), (20.0, 3_000.0)]);
        assert_eq!(t.rise_per_s(), 100.0);
        assert_eq!(t.ahead(20.0), Some(5_000.0));
    }

    #[test]
    fn the_smaller_rise_of_the_two_counts() {
        let t = trend(&[(0.0, 1_000.0), (10.0, 5_000.0), (20.0, 5_500.0)]);
        assert_eq!(t.rise_per_s(), 50.0);
    }

    #[test]
    fn one_jump_or_a_fall_adds_nothing() {
        for points in [
            // A jump, then flat.
            &[(0.0, 0.0), (10.0, 9_000.0), (20.0, 9_000.0)][..],
            // Up, then down.
            &[(0.0, 5_000.0), (10.0, 6_000.0), (20.0, 5_500.0)],
            // Falling.
            &[(0.0, 9_000.0), (10.0, 6_000.0), (20.0, 3_000.0)],
            // Too few windows to see a trend.
            &[(0.0, 1_000.0), (10.0, 2_000.0)],
        ] {
            let t = trend(points);
            assert_eq!(t.rise_per_s(), 0.0, "{points:?}");
            assert_eq!(t.ahead(20.0), points.last().map(|p| p.1), "{points:?}");
        }
        assert_eq!(Trend::default().ahead(20.0), None);
    }

    #[test]
    fn only_the_last_three_observations_count_and_time_must_move() {
        let mut t = trend(&[
            (0.0, 0.0),
            (10.0, 1_000.0),
            (20.0, 2_000.0),
            (30.0, 2_000.0),
        ]);
        assert_eq!(t.rise_per_s(), 0.0);
        // A second figure at the same instant replaces the first: no division by zero.
        t.record(30.0, 3_000.0);
        assert_eq!(t.rise_per_s(), 100.0);
        assert!(t.ahead(10.0).unwrap().is_finite());
    }
}
