//! How many replicas a tenant needs: `ceil(offered / (knee x targetUtilisation))` within
//! `min`/`max`, with a tolerance band so that noise does not move it. Up at once (the forecast,
//! or distress: p95 over the target, a WAL backlog that keeps growing, less than 99 %
//! acknowledged), counting new pods only once they are Ready; down slowly (the highest
//! recommendation of a stabilisation window, one pod at a time, a cool-down after each change)
//! and only when scale-down is allowed (it goes through decommissioning); and no further up
//! once added pods stopped adding acknowledged throughput (the node is the limit).

use std::collections::VecDeque;

/// The tenant's autoscaling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub min: i32,
    pub max: i32,
    /// Share of the knee each pod should run at (0.7).
    pub target_utilisation: f64,
    /// No change while offered / capacity is within 1 +- this (0.1).
    pub tolerance: f64,
    pub p95_target_ms: f64,
    /// A scale-down follows the highest recommendation of this long (300 s).
    pub down_stabilisation_s: f64,
    /// No scale-down sooner than this after any change (120 s).
    pub cooldown_s: f64,
    /// Whether pods may be removed (they must be decommissioned first).
    pub scale_down: bool,
    /// p95 over the target is distress only at this share of the knee per pod or more (0.5).
    pub loaded_share: f64,
}

impl Policy {
    pub fn new(min: i32, max: i32, p95_target_ms: f64) -> Self {
        Self {
            min,
            max,
            target_utilisation: 0.7,
            tolerance: 0.1,
            p95_target_ms,
            down_stabilisation_s: 300.0,
            cooldown_s: 120.0,
            scale_down: false,
            loaded_share: 0.5,
        }
    }
}

/// The tenant now, summed over its Ready pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub now_s: f64,
    /// `spec.replicas`.
    pub replicas: i32,
    pub ready: i32,
    pub offered_pps: f64,
    pub acked_pps: f64,
    pub p95_ms: Option<f64>,
    /// The WAL backlog grew over the last windows.
    pub backlog_growing: bool,
}

/// Why the decision is what it is (an Event's reason and a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The offered rate needs more (or fewer) pods at the knee.
    Forecast,
    /// p95 above `p95Target`.
    LatencyOverTarget,
    BacklogGrowing,
    /// Less than 99 % of what was offered was acknowledged.
    Unacknowledged,
    /// Within the tolerance band.
    Steady,
    /// Waiting for new pods to be Ready before judging again.
    WaitingForReady,
    /// More would be needed, but `max` is reached.
    AtMax,
    /// Fewer would do, but `min` is reached.
    AtMin,
    /// Fewer would do, but scale-down is not allowed.
    ScaleDownDisabled,
    /// Fewer would do, but not yet (stabilisation window, cool-down).
    Stabilising,
    /// Pods added last time did not add acknowledged throughput: adding more would not help.
    Plateau,
    /// No knee yet and no sign of distress.
    NoKnee,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Forecast => "Forecast",
            Reason::LatencyOverTarget => "LatencyOverTarget",
            Reason::BacklogGrowing => "BacklogGrowing",
            Reason::Unacknowledged => "Unacknowledged",
            Reason::Steady => "Steady",
            Reason::WaitingForReady => "WaitingForReady",
            Reason::AtMax => "AtMax",
            Reason::AtMin => "AtMin",
            Reason::ScaleDownDisabled => "ScaleDownDisabled",
            Reason::Stabilising => "Stabilising",
            Reason::Plateau => "Plateau",
            Reason::NoKnee => "NoKnee",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub replicas: i32,
    pub reason: Reason,
}

/// A change the autoscaler made, and the throughput before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub at_s: f64,
    pub from: i32,
    pub to: i32,
    pub acked_before_pps: f64,
}

/// What the decision remembers between calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub last_change: Option<Change>,
    /// Recommendations of the stabilisation window, oldest first.
    recommendations: VecDeque<(f64, i32)>,
}

/// The decision for `obs`, given the knee per pod (points/s) when there is one. Records a
/// change in `history` when the decision differs from `obs.replicas`.
pub fn decide(
    policy: &Policy,
    obs: &Observed,
    knee: Option<f64>,
    history: &mut History,
) -> Decision {
    let d = decide_inner(policy, obs, knee, history);
    if d.replicas != obs.replicas {
        history.last_change = Some(Change {
            at_s: obs.now_s,
            from: obs.replicas,
            to: d.replicas,
            acked_before_pps: obs.acked_pps,
        });
    }
    d
}

fn decide_inner(
    policy: &Policy,
    obs: &Observed,
    knee: Option<f64>,
    history: &mut History,
) -> Decision {
    let hold = |reason| Decision {
        replicas: obs.replicas.clamp(policy.min, policy.max),
        reason,
    };
    if obs.ready < obs.replicas {
        return hold(Reason::WaitingForReady);
    }
    // Latency over the target is a reason to add a pod only when the pods carry load: at a
    // fraction of their knee it comes from something more pods would not fix (a merge, the
    // backlog of a busier minute), and it would hold off every scale-down.
    let loaded = knee
        .is_none_or(|k| obs.offered_pps / f64::from(obs.ready.max(1)) >= policy.loaded_share * k);
    let distress = if loaded && obs.p95_ms.is_some_and(|p| p > policy.p95_target_ms) {
        Some(Reason::LatencyOverTarget)
    } else if obs.backlog_growing {
        Some(Reason::BacklogGrowing)
    } else if obs.offered_pps > 0.0 && obs.acked_pps < 0.99 * obs.offered_pps {
        Some(Reason::Unacknowledged)
    } else {
        None
    };
    let forecast = knee.filter(|k| *k > 0.0).map(|k| {
        let per_pod = k * policy.target_utilisation;
        ((obs.offered_pps / per_pod).ceil() as i32).max(1)
    });
    // The recommendation: the forecast, but under distress at least one more pod.
    let (mut want, reason) = match (forecast, distress) {
        (Some(f), Some(r)) => (
            f.max(obs.replicas + 1),
            if f > obs.replicas {
                Reason::Forecast
            } else {
                r
            },
        ),
        (None, Some(r)) => (obs.replicas + 1, r),
        (Some(f), None) => (f, Reason::Forecast),
        (None, None) => return hold(Reason::NoKnee),
    };
    // Within the band around the current capacity: stay.
    if distress.is_none() {
        if let Some(k) = knee {
            let capacity = obs.replicas as f64 * k * policy.target_utilisation;
            let load = obs.offered_pps / capacity.max(1.0);
            if (load - 1.0).abs() <= policy.tolerance || (want > obs.replicas && load <= 1.0) {
                want = obs.replicas;
            }
        }
    }
    history.recommendations.push_back((obs.now_s, want));
    // Kept: the newest recommendation at least a window old (in force when the window began)
    // and everything after it. Whatever the sampling interval, the window is then full once
    // the oldest kept one is a window old.
    while history
        .recommendations
        .get(1)
        .is_some_and(|(t, _)| obs.now_s - t >= policy.down_stabilisation_s)
    {
        history.recommendations.pop_front();
    }
    if want > obs.replicas {
        if let Some(c) = history.last_change {
            // The last pods added gave less than a quarter of what they should have, and the
            // tenant still wants more: the node (CPU, disk) is the limit.
            let expected = c.acked_before_pps * (c.to - c.from) as f64 / c.from.max(1) as f64;
            if c.to > c.from
                && c.to == obs.replicas
                && obs.acked_pps < c.acked_before_pps + 0.25 * expected
            {
                return hold(Reason::Plateau);
            }
        }
        if obs.replicas >= policy.max {
            return hold(Reason::AtMax);
        }
        return Decision {
            replicas: want.min(policy.max),
            reason,
        };
    }
    if want < obs.replicas {
        if obs.replicas <= policy.min {
            return hold(Reason::AtMin);
        }
        if !policy.scale_down {
            return hold(Reason::ScaleDownDisabled);
        }
        let window_full = history
            .recommendations
            .front()
            .is_some_and(|(t, _)| obs.now_s - t >= policy.down_stabilisation_s);
        let highest = history
            .recommendations
            .iter()
            .map(|(_, r)| *r)
            .max()
            .unwrap_or(want);
        let cooled = history
            .last_change
            .is_none_or(|c| obs.now_s - c.at_s >= policy.cooldown_s);
        if !window_full || highest >= obs.replicas || !cooled {
            return hold(Reason::Stabilising);
        }
        return Decision {
            replicas: (obs.replicas - 1).max(policy.min),
            reason: Reason::Forecast,
        };
    }
    hold(Reason::Steady)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenant whose pods each serve up to `capacity(n)` points/s when there are `n` of them
    /// (constant: a queue per pod; falling with `n`: contention, Universal Scalability Law),
    /// with p95 from an M/M/1-like curve.
    struct Tenant {
        capacity: Box<dyn Fn(i32) -> f64>,
        replicas: i32,
        ready: i32,
    }

    impl Tenant {
        fn observe(&self, now_s: f64, offered: f64) -> Observed {
            let cap = (self.capacity)(self.ready) * self.ready as f64;
            let rho = offered / cap;
            let acked = offered.min(cap);
            Observed {
                now_s,
                replicas: self.replicas,
                ready: self.ready,
                offered_pps: offered,
                acked_pps: acked,
                p95_ms: Some(if rho < 0.98 {
                    10.0 / (1.0 - rho)
                } else {
                    2_000.0
                }),
                backlog_growing: rho > 1.0,
            }
        }
    }

    fn queueing(knee: f64) -> Tenant {
        Tenant {
            capacity: Box::new(move |_| knee),
            replicas: 1,
            ready: 1,
        }
    }

    /// Runs `offered(t)` every 10 s for `steps`; new pods take `ready_after` steps. Returns the
    /// replicas after each step and the decisions that changed something.
    fn simulate(
        t: &mut Tenant,
        policy: &Policy,
        knee: Option<f64>,
        steps: usize,
        offered: impl Fn(usize) -> f64,
    ) -> (Vec<i32>, Vec<Decision>) {
        simulate_every(t, policy, knee, steps, 10.0, offered)
    }

    /// [`simulate`] with a step every `interval_s`.
    fn simulate_every(
        t: &mut Tenant,
        policy: &Policy,
        knee: Option<f64>,
        steps: usize,
        interval_s: f64,
        offered: impl Fn(usize) -> f64,
    ) -> (Vec<i32>, Vec<Decision>) {
        let mut h = History::default();
        let (mut replicas, mut changes) = (Vec::new(), Vec::new());
        for i in 0..steps {
            let obs = t.observe(i as f64 * interval_s, offered(i));
            let d = decide(policy, &obs, knee, &mut h);
            if d.replicas != t.replicas {
                changes.push(d);
            }
            if d.replicas < t.replicas {
                t.ready = d.replicas;
            } else if t.ready < t.replicas {
                // Pods asked for in the previous step are Ready now.
                t.ready = t.replicas;
            }
            t.replicas = d.replicas;
            replicas.push(t.replicas);
        }
        (replicas, changes)
    }

    #[test]
    fn a_rising_load_is_met_at_once_from_the_forecast() {
        let mut t = queueing(1_000_000.0);
        let policy = Policy::new(1, 10, 100.0);
        // 0.5 M for a minute, then 3 M.
        let (r, changes) = simulate(&mut t, &policy, Some(1_000_000.0), 30, |i| {
            if i < 6 {
                500_000.0
            } else {
                3_000_000.0
            }
        });
        assert_eq!(r[5], 1);
        // ceil(3 M / (1 M x 0.7)) = 5, decided in the first window that saw the load.
        assert_eq!(r[6], 5, "{r:?}");
        assert_eq!(*r.last().unwrap(), 5);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].reason, Reason::Forecast);
    }

    #[test]
    fn noise_around_a_steady_load_changes_nothing() {
        let mut t = queueing(1_000_000.0);
        t.replicas = 4;
        t.ready = 4;
        let policy = Policy::new(1, 10, 100.0);
        // 4 pods x 0.7 M = 2.8 M of capacity; 2.6-2.9 M offered, deterministic noise.
        let (_, changes) = simulate(&mut t, &policy, Some(1_000_000.0), 200, |i| {
            2_750_000.0 + 150_000.0 * ((i * 7919 % 13) as f64 / 6.0 - 1.0)
        });
        assert!(changes.is_empty(), "{changes:?}");
    }

    #[test]
    fn distress_without_a_knee_adds_one_pod_at_a_time() {
        let mut t = queueing(1_000_000.0);
        let policy = Policy::new(1, 10, 100.0);
        let (r, changes) = simulate(&mut t, &policy, None, 20, |_| 2_500_000.0);
        // p95 over the target and unacknowledged points until 3 pods carry 2.5 M.
        assert_eq!(*r.last().unwrap(), 3, "{r:?}");
        assert!(
            changes.iter().all(|d| d.reason != Reason::Forecast),
            "{changes:?}"
        );
        // New pods are judged only once Ready: never two changes in a row.
        assert!(r.windows(3).all(|w| !(w[0] < w[1] && w[1] < w[2])), "{r:?}");
    }

    #[test]
    fn latency_spikes_at_light_load_neither_add_pods_nor_hold_off_a_scale_down() {
        let mut policy = Policy::new(1, 4, 500.0);
        policy.scale_down = true;
        policy.down_stabilisation_s = 30.0;
        policy.cooldown_s = 30.0;
        let mut h = History::default();
        // Four pods left at a fifth of their knee after a busy minute; every third window one
        // of them merges parts and p95 jumps over the target.
        let mut replicas = 4;
        for i in 0..30 {
            let obs = Observed {
                now_s: i as f64 * 10.0,
                replicas,
                ready: replicas,
                offered_pps: 5_000.0,
                acked_pps: 5_000.0,
                p95_ms: Some(if i % 3 == 0 { 1_638.0 } else { 100.0 }),
                backlog_growing: false,
            };
            let d = decide(&policy, &obs, Some(14_000.0), &mut h);
            assert_ne!(d.reason, Reason::LatencyOverTarget, "window {i}");
            assert!(d.replicas <= replicas, "window {i}: {d:?}");
            replicas = d.replicas;
        }
        assert_eq!(replicas, 1);
        // At two thirds of the knee the same p95 is distress.
        let obs = Observed {
            now_s: 400.0,
            replicas: 1,
            ready: 1,
            offered_pps: 9_500.0,
            acked_pps: 9_500.0,
            p95_ms: Some(1_638.0),
            backlog_growing: false,
        };
        let d = decide(&policy, &obs, Some(14_000.0), &mut h);
        assert_eq!((d.replicas, d.reason), (2, Reason::LatencyOverTarget));
    }

    #[test]
    fn max_bounds_the_scale_and_says_so() {
        let mut t = queueing(1_000_000.0);
        let policy = Policy::new(1, 3, 100.0);
        let (r, _) = simulate(&mut t, &policy, Some(1_000_000.0), 5, |_| 10_000_000.0);
        assert_eq!(*r.last().unwrap(), 3);
        let obs = t.observe(100.0, 10_000_000.0);
        let d = decide(&policy, &obs, Some(1_000_000.0), &mut History::default());
        assert_eq!(
            d,
            Decision {
                replicas: 3,
                reason: Reason::AtMax
            }
        );
    }

    #[test]
    fn scale_down_is_slow_one_pod_at_a_time_and_only_when_allowed() {
        let mut t = queueing(1_000_000.0);
        t.replicas = 5;
        t.ready = 5;
        let mut policy = Policy::new(1, 10, 100.0);
        let (r, _) = simulate(&mut t, &policy, Some(1_000_000.0), 60, |_| 500_000.0);
        assert_eq!(
            *r.last().unwrap(),
            5,
            "without decommissioning, nothing is removed"
        );
        let obs = t.observe(0.0, 500_000.0);
        let d = decide(&policy, &obs, Some(1_000_000.0), &mut History::default());
        assert_eq!(d.reason, Reason::ScaleDownDisabled);

        policy.scale_down = true;
        let (r, changes) = simulate(&mut t, &policy, Some(1_000_000.0), 200, |_| 500_000.0);
        // Nothing during the first stabilisation window (300 s = 30 steps).
        assert!(r[..29].iter().all(|n| *n == 5), "{r:?}");
        assert_eq!(*r.last().unwrap(), 1);
        assert!(changes.iter().all(|d| d.reason == Reason::Forecast));
        // One pod at a time, with at least the cool-down (12 steps) between.
        let at: Vec<usize> = r
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1] != w[0])
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 4, "{r:?}");
        assert!(at.windows(2).all(|w| w[1] - w[0] >= 12), "{at:?}");
        // A burst inside the window keeps the pods.
        let mut t = queueing(1_000_000.0);
        t.replicas = 5;
        t.ready = 5;
        let (r, _) = simulate(&mut t, &policy, Some(1_000_000.0), 60, |i| {
            if i % 20 == 10 {
                3_300_000.0
            } else {
                500_000.0
            }
        });
        assert_eq!(*r.last().unwrap(), 5, "{r:?}");
    }

    #[test]
    fn a_short_window_fills_whatever_the_sampling_interval() {
        // Samples 10.3 s apart never land exactly a 30 s window back; the scale-down comes
        // all the same, one pod at a time.
        for interval in [10.0, 10.3, 7.9, 29.0] {
            let mut t = queueing(1_000_000.0);
            t.replicas = 3;
            t.ready = 3;
            let mut policy = Policy::new(1, 3, 100.0);
            policy.scale_down = true;
            policy.down_stabilisation_s = 30.0;
            policy.cooldown_s = 30.0;
            let (r, changes) =
                simulate_every(&mut t, &policy, Some(1_000_000.0), 40, interval, |_| 0.0);
            assert_eq!(*r.last().unwrap(), 1, "every {interval} s: {r:?}");
            assert_eq!(changes.len(), 2, "every {interval} s: {r:?}");
            // Not before the window has passed.
            let first = r.iter().position(|n| *n < 3).unwrap();
            assert!(first as f64 * interval >= 30.0, "every {interval} s: {r:?}");
        }
    }

    #[test]
    fn when_pods_stop_adding_throughput_the_autoscaler_stops_adding_pods() {
        // USL: throughput peaks at 2 pods and falls after (a shared disk).
        let mut t = Tenant {
            capacity: Box::new(|n| 1_000_000.0 / (1.0 + 0.9 * (n - 1) as f64)),
            replicas: 2,
            ready: 2,
        };
        let policy = Policy::new(1, 10, 100.0);
        let (r, changes) = simulate(&mut t, &policy, None, 30, |_| 3_000_000.0);
        let last = *r.last().unwrap();
        assert!(last <= 4, "kept adding pods: {r:?}");
        let obs = t.observe(1_000.0, 3_000_000.0);
        let mut h = History {
            last_change: Some(Change {
                at_s: 0.0,
                from: last - 1,
                to: last,
                acked_before_pps: t.observe(0.0, 3_000_000.0).acked_pps,
            }),
            ..Default::default()
        };
        assert_eq!(
            decide(&policy, &obs, None, &mut h).reason,
            Reason::Plateau,
            "{changes:?}"
        );
    }
}
