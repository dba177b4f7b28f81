//! How many replicas a tenant needs: `ceil(offered / (knee x targetUtilisation))` within
//! `min`/`max`, with a tolerance band so that noise does not move it. Up at once (the forecast,
//! or distress: p95 over the target, a WAL backlog that keeps growing, less than 99 %
//! acknowledged), counting new pods only once they are Ready, and on a rising load from the
//! rate a pod added now will meet (see [`super::trend`]); down slowly (the highest
//! recommendation of a stabilisation window, one pod at a time, a cool-down after each change)
//! and only when scale-down is allowed (it goes through decommissioning); and no further up
//! once added pods stopped adding acknowledged throughput (the node is the limit).

use std::collections::VecDeque;

use super::trend::Trend;

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
    /// How far ahead a rising load is extrapolated (10 s, the autoscaler's interval): the
    /// load the pods will meet at the next decision. Further ahead, noise near the band's edge
    /// (two rises in a row of a few percent) would add pods under a steady load.
    pub lead_s: f64,
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
            lead_s: 10.0,
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
    /// The offered rate's last windows, for the rate a new pod will meet.
    trend: Trend,
}

/// The decision for `obs`, given the knee per pod (points/s) when there is one. Records a
/// change in `history` when the decision differs from `obs.replicas`.
pub fn decide(
    policy: &Policy,
    obs: &Observed,
    knee: Option<f64>,
    history: &mut History,
) -> Decision {
    history.trend.record(obs.now_s, obs.offered_pps);
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
    // The rate the pods will carry once a pod added now helps: the offered rate (just
    // recorded), or more on a load that rose in the last two windows.
    let ahead = history
        .trend
        .ahead(policy.lead_s)
        .unwrap_or(obs.offered_pps);
    let forecast = knee.filter(|k| *k > 0.0).map(|k| {
        let per_pod = k * policy.target_utilisation;
        ((ahead / per_pod).ceil() as i32).max(1)
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
            let load = ahead / capacity.max(1.0);
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
mod tests;
