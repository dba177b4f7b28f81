//! Stage 4 of a reconcile: what the tenant's status says, as a pure function of what was
//! observed.
//!
//! Pure so that it can be unit tested on every combination, and deterministic so that an
//! unchanged world yields an identical status: the reconciler writes the status only when it
//! differs, and a condition's `lastTransitionTime` moves only when its `status` flips (the
//! Kubernetes convention), never on every reconcile.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::crd::{IngestTenantStatus, Phase};

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";
/// True while the autoscaler holds at a capacity plateau (`status.plateau`).
pub const PLATEAU: &str = "Plateau";

/// Something that needs a human. Each becomes the Degraded condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The spec cannot be turned into a server configuration.
    InvalidSpec(String),
    /// The API server refused an object (e.g. a field the StatefulSet cannot change).
    ApplyFailed(String),
    /// `spec.auth.tokenSecretRef` names a Secret or key that does not exist.
    TokenSecretMissing(String),
    /// Pods cannot pull their image, crash-loop, or cannot be scheduled.
    PodsFailing(String),
    /// A scale-down waits: the pod that would receive the leaving pod's data refuses it.
    DecommissionRefused(String),
}

impl Problem {
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::InvalidSpec(_) => "InvalidSpec",
            Problem::ApplyFailed(_) => "ApplyFailed",
            Problem::TokenSecretMissing(_) => "TokenSecretMissing",
            Problem::PodsFailing(_) => "PodsFailing",
            Problem::DecommissionRefused(_) => "DecommissionRefused",
        }
    }
    pub fn message(&self) -> &str {
        match self {
            Problem::InvalidSpec(m)
            | Problem::ApplyFailed(m)
            | Problem::TokenSecretMissing(m)
            | Problem::PodsFailing(m)
            | Problem::DecommissionRefused(m) => m,
        }
    }
}

/// What the reconciler saw this time.
#[derive(Debug, Clone, Default)]
pub struct Observation<'a> {
    pub generation: Option<i64>,
    /// Replicas the StatefulSet should have (after clamping), `None` when the spec is invalid.
    pub desired_replicas: Option<i32>,
    pub selector: Option<String>,
    pub config_hash: Option<String>,
    pub stateful_set: Option<&'a StatefulSet>,
    pub problems: Vec<Problem>,
    /// The scale-down under way, if any.
    pub decommission: Option<crate::crd::DecommissionStatus>,
    /// The calibration as the calibration stage left it; `None` keeps the previous one.
    pub calibration: Option<crate::crd::CalibrationStatus>,
}

fn condition(
    prev: Option<&IngestTenantStatus>,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = prev
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// The StatefulSet's rollout state, as far as it matters for the tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Rollout {
    replicas: i32,
    ready: i32,
    updated: i32,
    observed: bool,
    revision_current: bool,
}

fn rollout(sts: &StatefulSet) -> Rollout {
    let Some(st) = sts.status.as_ref() else {
        return Rollout::default();
    };
    let observed = match (st.observed_generation, sts.metadata.generation) {
        (Some(o), Some(g)) => o >= g,
        _ => false,
    };
    Rollout {
        replicas: st.replicas,
        ready: st.ready_replicas.unwrap_or(0),
        updated: st.updated_replicas.unwrap_or(0),
        observed,
        revision_current: st.update_revision.is_none() || st.current_revision == st.update_revision,
    }
}

/// Computes the status. Autoscaler fields (knee, rate, p95, traffic, last scaling, plateau)
/// are carried over from `prev`: they are written by the autoscaler, not derived here.
pub fn compute(
    prev: Option<&IngestTenantStatus>,
    obs: &Observation<'_>,
    now: Time,
) -> IngestTenantStatus {
    let gen = obs.generation;
    let invalid = obs
        .problems
        .iter()
        .any(|p| matches!(p, Problem::InvalidSpec(_)));
    let r = obs.stateful_set.map(rollout);
    let desired = obs.desired_replicas;

    let (ready_ok, ready_reason, ready_msg) = match (desired, r) {
        (None, _) => (
            false,
            "InvalidSpec",
            "the spec is invalid; see the Degraded condition".to_string(),
        ),
        (Some(0), _) => (false, "ScaledToZero", "spec.replicas is 0".to_string()),
        (Some(_), None) => (
            false,
            "NotCreated",
            "the StatefulSet does not exist yet".to_string(),
        ),
        (Some(d), Some(r)) => {
            let done = r.observed && r.revision_current && r.updated >= d && r.replicas == d;
            if r.ready >= d && done {
                (
                    true,
                    "AllReplicasReady",
                    format!("{}/{d} replicas ready", r.ready),
                )
            } else {
                (
                    false,
                    "ReplicasNotReady",
                    format!("{}/{d} replicas ready", r.ready),
                )
            }
        }
    };

    let (prog, prog_reason, prog_msg) = match (desired, r) {
        (None, _) => (
            false,
            "InvalidSpec",
            "nothing is rolled out while the spec is invalid".to_string(),
        ),
        (Some(_), None) => (true, "Creating", "creating the StatefulSet".to_string()),
        (Some(d), Some(r)) => {
            if !r.observed {
                (
                    true,
                    "RollingOut",
                    "the StatefulSet controller has not seen the latest change yet".to_string(),
                )
            } else if r.replicas != d {
                (
                    true,
                    "Scaling",
                    format!("scaling from {} to {d} replicas", r.replicas),
                )
            } else if !r.revision_current || r.updated < d {
                (
                    true,
                    "RollingOut",
                    format!("{}/{d} replicas run the current configuration", r.updated),
                )
            } else if r.ready < d {
                (
                    true,
                    "WaitingForReadiness",
                    format!("{}/{d} replicas ready", r.ready),
                )
            } else {
                (
                    false,
                    "RolloutComplete",
                    "every replica runs the current configuration".to_string(),
                )
            }
        }
    };

    let (degraded, deg_reason, deg_msg) = match obs.problems.first() {
        Some(first) => (
            true,
            first.reason(),
            obs.problems
                .iter()
                .map(|p| p.message())
                .collect::<Vec<_>>()
                .join("; "),
        ),
        None => (false, "AsExpected", "no problems observed".to_string()),
    };

    let phase = if degraded || invalid {
        Phase::Degraded
    } else {
        match (desired, r) {
            (_, None) => Phase::Pending,
            (Some(0), Some(r)) if r.replicas == 0 => Phase::Stopped,
            _ if ready_ok => Phase::Running,
            _ => Phase::Progressing,
        }
    };

    let conditions = vec![
        condition(prev, READY, ready_ok, ready_reason, ready_msg, gen, &now),
        condition(prev, PROGRESSING, prog, prog_reason, prog_msg, gen, &now),
        condition(prev, DEGRADED, degraded, deg_reason, deg_msg, gen, &now),
        match prev.and_then(|p| p.plateau.as_ref()) {
            Some(p) => condition(
                prev,
                PLATEAU,
                true,
                "CapacityPlateau",
                p.message.clone(),
                gen,
                &now,
            ),
            None => condition(
                prev,
                PLATEAU,
                false,
                "NoPlateau",
                "added pods add throughput (or the autoscaler is off)".to_string(),
                gen,
                &now,
            ),
        },
    ];

    IngestTenantStatus {
        observed_generation: gen,
        replicas: r.map(|r| r.replicas).unwrap_or(0),
        ready_replicas: r.map(|r| r.ready).unwrap_or(0),
        selector: obs.selector.clone(),
        phase: Some(phase),
        conditions,
        config_hash: obs
            .config_hash
            .clone()
            .or_else(|| prev.and_then(|p| p.config_hash.clone())),
        knee: prev.and_then(|p| p.knee.clone()),
        calibration: obs
            .calibration
            .clone()
            .or_else(|| prev.and_then(|p| p.calibration.clone())),
        traffic: prev.and_then(|p| p.traffic.clone()),
        plateau: prev.and_then(|p| p.plateau.clone()),
        rate: prev.and_then(|p| p.rate),
        p95: prev.and_then(|p| p.p95.clone()),
        last_scaling: prev.and_then(|p| p.last_scaling.clone()),
        decommission: obs.decommission.clone(),
    }
}

/// Waiting reasons that mean a pod will not become ready without a change.
fn failing_reason(reason: &str) -> Option<&'static str> {
    match reason {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            Some("cannot pull its image")
        }
        "CrashLoopBackOff" => Some("is crash-looping"),
        "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError" => {
            Some("cannot start its container")
        }
        _ => None,
    }
}

/// Describes pods that are stuck, in a stable wording (the kubelet alternates between
/// `ErrImagePull` and `ImagePullBackOff`; the status must not flap with it).
pub fn pod_problems(pods: &[Pod]) -> Option<Problem> {
    let mut msgs: Vec<(String, String)> = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(st) = pod.status.as_ref() else {
            continue;
        };
        let waiting = st
            .container_statuses
            .iter()
            .flatten()
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
            .find_map(failing_reason);
        if let Some(what) = waiting {
            let image = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            let what = if what == "cannot pull its image" {
                format!("cannot pull image {image:?}")
            } else {
                what.to_string()
            };
            msgs.push((name, what));
            continue;
        }
        let unschedulable = st.conditions.iter().flatten().find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
        if let Some(c) = unschedulable {
            msgs.push((
                name,
                format!(
                    "cannot be scheduled: {}",
                    c.message.as_deref().unwrap_or("")
                ),
            ));
        }
    }
    if msgs.is_empty() {
        return None;
    }
    msgs.sort();
    const SHOWN: usize = 3;
    let mut text = msgs
        .iter()
        .take(SHOWN)
        .map(|(n, w)| format!("pod {n} {w}"))
        .collect::<Vec<_>>()
        .join("; ");
    if msgs.len() > SHOWN {
        text.push_str(&format!(" (and {} more pods)", msgs.len() - SHOWN));
    }
    Some(Problem::PodsFailing(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetStatus;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateWaiting, ContainerStatus, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::chrono::{TimeZone, Utc};

    fn t(secs: i64) -> Time {
        Time(Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap())
    }

    fn sts(
        gen: i64,
        observed: i64,
        replicas: i32,
        ready: i32,
        updated: i32,
        same_rev: bool,
    ) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                generation: Some(gen),
                ..Default::default()
            },
            status: Some(StatefulSetStatus {
                observed_generation: Some(observed),
                replicas,
                ready_replicas: Some(ready),
                updated_replicas: Some(updated),
                current_revision: Some("a".into()),
                update_revision: Some(if same_rev { "a" } else { "b" }.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn obs(s: Option<&StatefulSet>, desired: i32) -> Observation<'_> {
        Observation {
            generation: Some(2),
            desired_replicas: Some(desired),
            selector: Some("app=x".into()),
            config_hash: Some("h".into()),
            stateful_set: s,
            problems: vec![],
            decommission: None,
            calibration: None,
        }
    }

    fn cond<'a>(s: &'a IngestTenantStatus, t: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn all_ready_is_running() {
        let s = sts(1, 1, 3, 3, 3, true);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(st.phase, Some(Phase::Running));
        assert_eq!(cond(&st, READY).status, "True");
        assert_eq!(cond(&st, READY).message, "3/3 replicas ready");
        assert_eq!(cond(&st, PROGRESSING).status, "False");
        assert_eq!(cond(&st, DEGRADED).status, "False");
        assert_eq!(st.observed_generation, Some(2));
        assert_eq!((st.replicas, st.ready_replicas), (3, 3));
        assert_eq!(st.selector.as_deref(), Some("app=x"));
    }

    #[test]
    fn a_plateau_found_by_the_autoscaler_is_a_condition_and_stays_its_own() {
        let s = sts(1, 1, 3, 3, 3, true);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(cond(&st, PLATEAU).status, "False");
        let mut prev = st.clone();
        prev.plateau = Some(crate::crd::PlateauStatus {
            since: t(1),
            message: "the node is the limit".into(),
        });
        let st = compute(Some(&prev), &obs(Some(&s), 3), t(2));
        let c = cond(&st, PLATEAU);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "CapacityPlateau")
        );
        assert_eq!(c.message, "the node is the limit");
        assert_eq!(st.plateau, prev.plateau);
        // Not a fault of the tenant's: it keeps running.
        assert_eq!(st.phase, Some(Phase::Running));
        // The decommission under way is reported as observed.
        let mut o = obs(Some(&s), 3);
        o.decommission = Some(crate::crd::DecommissionStatus {
            ordinal: 2,
            phase: "handing_over".into(),
            ..Default::default()
        });
        assert_eq!(compute(Some(&prev), &o, t(3)).decommission, o.decommission);
    }

    #[test]
    fn no_statefulset_is_pending() {
        let st = compute(None, &obs(None, 1), t(0));
        assert_eq!(st.phase, Some(Phase::Pending));
        assert_eq!(cond(&st, PROGRESSING).reason, "Creating");
    }

    #[test]
    fn rolling_and_scaling_are_progressing() {
        let s = sts(2, 1, 3, 3, 3, true);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(st.phase, Some(Phase::Progressing));
        assert_eq!(cond(&st, PROGRESSING).reason, "RollingOut");

        let s = sts(2, 2, 3, 3, 1, false);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(
            cond(&st, PROGRESSING).message,
            "1/3 replicas run the current configuration"
        );
        assert_eq!(cond(&st, READY).status, "False");

        let s = sts(2, 2, 1, 1, 1, true);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(cond(&st, PROGRESSING).reason, "Scaling");
        assert_eq!(
            cond(&st, PROGRESSING).message,
            "scaling from 1 to 3 replicas"
        );

        let s = sts(2, 2, 3, 1, 3, true);
        let st = compute(None, &obs(Some(&s), 3), t(0));
        assert_eq!(cond(&st, PROGRESSING).reason, "WaitingForReadiness");
        assert_eq!(cond(&st, READY).message, "1/3 replicas ready");
    }

    #[test]
    fn zero_replicas_is_stopped() {
        let s = sts(1, 1, 0, 0, 0, true);
        let st = compute(None, &obs(Some(&s), 0), t(0));
        assert_eq!(st.phase, Some(Phase::Stopped));
        assert_eq!(cond(&st, READY).reason, "ScaledToZero");
    }

    #[test]
    fn problems_degrade_with_reason_and_message() {
        let s = sts(1, 1, 1, 0, 1, true);
        let mut o = obs(Some(&s), 1);
        o.problems = vec![
            Problem::TokenSecretMissing("Secret \"t\" not found".into()),
            Problem::PodsFailing("pod x-0 cannot pull image \"i\"".into()),
        ];
        let st = compute(None, &o, t(0));
        assert_eq!(st.phase, Some(Phase::Degraded));
        let d = cond(&st, DEGRADED);
        assert_eq!(d.status, "True");
        assert_eq!(d.reason, "TokenSecretMissing");
        assert_eq!(
            d.message,
            "Secret \"t\" not found; pod x-0 cannot pull image \"i\""
        );

        let o = Observation {
            generation: Some(4),
            desired_replicas: None,
            problems: vec![Problem::InvalidSpec("spec.pool.flushInterval: bad".into())],
            ..Default::default()
        };
        let st = compute(None, &o, t(0));
        assert_eq!(st.phase, Some(Phase::Degraded));
        assert_eq!(cond(&st, DEGRADED).reason, "InvalidSpec");
        assert_eq!(cond(&st, PROGRESSING).status, "False");
        assert_eq!(st.observed_generation, Some(4));
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let s = sts(1, 1, 3, 1, 3, true);
        let first = compute(None, &obs(Some(&s), 3), t(0));
        // Same world later: identical status, so the reconciler writes nothing.
        let again = compute(Some(&first), &obs(Some(&s), 3), t(60));
        assert_eq!(first, again);
        // More pods ready but still not all: message changes, transition time does not.
        let s2 = sts(1, 1, 3, 2, 3, true);
        let later = compute(Some(&first), &obs(Some(&s2), 3), t(120));
        assert_eq!(cond(&later, READY).last_transition_time, t(0));
        assert_eq!(cond(&later, READY).message, "2/3 replicas ready");
        // All ready: Ready flips, its time moves; Degraded stays False with its old time.
        let s3 = sts(1, 1, 3, 3, 3, true);
        let done = compute(Some(&later), &obs(Some(&s3), 3), t(180));
        assert_eq!(cond(&done, READY).last_transition_time, t(180));
        assert_eq!(cond(&done, DEGRADED).last_transition_time, t(0));
    }

    #[test]
    fn autoscaler_fields_are_carried_over() {
        let prev = IngestTenantStatus {
            rate: Some(1234.5),
            p95: Some("12ms".into()),
            ..Default::default()
        };
        let s = sts(1, 1, 1, 1, 1, true);
        let st = compute(Some(&prev), &obs(Some(&s), 1), t(0));
        assert_eq!(st.rate, Some(1234.5));
        assert_eq!(st.p95.as_deref(), Some("12ms"));
    }

    fn waiting_pod(name: &str, reason: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("img:1".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "c".into(),
                    state: Some(ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some(reason.into()),
                            message: Some("details that change".into()),
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pod_problems_are_worded_stably() {
        let a = pod_problems(&[
            waiting_pod("x-1", "ErrImagePull"),
            waiting_pod("x-0", "ImagePullBackOff"),
        ]);
        let b = pod_problems(&[
            waiting_pod("x-0", "ErrImagePull"),
            waiting_pod("x-1", "ImagePullBackOff"),
        ]);
        assert_eq!(a, b);
        assert_eq!(
            a.unwrap().message(),
            "pod x-0 cannot pull image \"img:1\"; pod x-1 cannot pull image \"img:1\""
        );
        assert_eq!(
            pod_problems(&[waiting_pod("x-0", "ContainerCreating")]),
            None
        );
        let many: Vec<_> = (0..5)
            .map(|i| waiting_pod(&format!("x-{i}"), "CrashLoopBackOff"))
            .collect();
        let m = pod_problems(&many).unwrap();
        assert!(
            m.message().ends_with("(and 2 more pods)"),
            "{}",
            m.message()
        );
    }
}
