//! The decision on synthetic tenants: queueing- and USL-shaped, noise included.

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

#[test]
fn a_ramp_is_met_one_window_ahead() {
    // A pod's knee is 10,000 points/s; the load rises by a fifth of it every 10 s window.
    let ramp = |i: usize| 3_000.0 + 2_000.0 * i as f64;
    let first_up = |lead_s: f64| {
        let mut t = queueing(10_000.0);
        let mut policy = Policy::new(1, 10, 500.0);
        policy.lead_s = lead_s;
        let (r, _) = simulate(&mut t, &policy, Some(10_000.0), 8, ramp);
        r.iter().position(|&n| n > 1)
    };
    // Without looking ahead: once 9,000 is offered, over 1.1 x 7,000 (the band above 70 %).
    assert_eq!(first_up(0.0), Some(3));
    // Looking ahead: at 7,000 after two rises of 2,000, the next window's 9,000 is foreseen,
    // one window before the pod's knee is crossed.
    assert_eq!(first_up(Policy::new(1, 10, 500.0).lead_s), Some(2));
}

#[test]
fn noise_near_the_band_with_the_look_ahead_changes_nothing() {
    let mut t = queueing(1_000_000.0);
    t.replicas = 4;
    t.ready = 4;
    let policy = Policy::new(1, 10, 100.0);
    // 4 pods x 0.7 M = 2.8 M of capacity; 2.75 M offered +-5 %, pseudo-random (so rises
    // in a row happen, and two of 5 % each take the look-ahead up to 1.08 of capacity).
    let noise = |i: usize| {
        // splitmix64 of the step: in [-1, 1).
        let mut z = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64 * 2.0 - 1.0
    };
    let (_, changes) = simulate(&mut t, &policy, Some(1_000_000.0), 500, |i| {
        2_750_000.0 * (1.0 + 0.05 * noise(i))
    });
    assert!(changes.is_empty(), "{changes:?}");
}
