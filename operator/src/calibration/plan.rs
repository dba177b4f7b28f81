//! What the calibration stage does, pure: given what is wanted ([`super::want`]), the status
//! as it stands and the calibration pods that exist, which pod to create or remove, what the
//! status says now and which Event tells it. A tenant needs a calibration when what sets a
//! pod's capacity changed, or when its traffic no longer looks like what the last one sent.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;

use super::result::{self, Found};
use super::want::{drifted, Want, RECALIBRATE_ANNOTATION};
use crate::crd::{CalibrationPhase, CalibrationStatus, PayloadShape, PayloadSource};

/// Past its timeout a pod is given this much more (the kubelet ends it at the timeout).
pub const GRACE: Duration = Duration::from_secs(30);

/// The load generator's container, as the pod's status tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// Not finished (or not started).
    Running,
    /// Finished with this exit code and termination message.
    Exited { code: i32, message: String },
}

/// One calibration pod, as read from the API server.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub name: String,
    /// Its capacity-hash label.
    pub hash: String,
    /// Seconds since it was created.
    pub age_s: f64,
    /// Being deleted already.
    pub deleting: bool,
    pub load: Load,
    /// Why the server container stopped, if it did (e.g. `OOMKilled`).
    pub server_stopped: Option<String>,
    /// Why the pod itself failed, if it did (`DeadlineExceeded`, an eviction).
    pub failed: Option<String>,
}

/// An Event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

/// What the stage does now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Pods to remove.
    pub delete: Vec<String>,
    /// Create a calibration pod for the wanted hash (the status says Running already; the
    /// stage fills in the pod's name).
    pub create: bool,
    /// The status to write; `None` leaves it as it is.
    pub status: Option<CalibrationStatus>,
    pub note: Option<Note>,
    /// A calibration is under way: look again soon.
    pub busy: bool,
}

/// What a calibration pod's state amounts to.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Running,
    Found(Found),
    Failed(String),
}

fn outcome(pod: &PodView, timeout: Duration) -> Outcome {
    let server = pod.server_stopped.as_ref().map_or(String::new(), |why| {
        format!(" (the server container stopped: {why})")
    });
    match &pod.load {
        Load::Exited { code: 0, message } => match result::parse(message) {
            Ok(found) => Outcome::Found(found),
            Err(e) => Outcome::Failed(format!("{e}{server}")),
        },
        Load::Exited { code, message } => Outcome::Failed(format!(
            "the load generator exited with code {code}{server}: {}",
            tail(message, 400)
        )),
        Load::Running => {
            if let Some(why) = &pod.failed {
                Outcome::Failed(format!("the calibration pod failed: {why}{server}"))
            } else if pod.age_s > (timeout + GRACE).as_secs_f64() {
                Outcome::Failed(format!(
                    "no result within the timeout of {}s{server}",
                    timeout.as_secs()
                ))
            } else {
                Outcome::Running
            }
        }
    }
}

/// The last `max` bytes of `s`, on a character boundary.
fn tail(s: &str, max: usize) -> &str {
    let s = s.trim();
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn describe(p: &PayloadShape) -> String {
    format!(
        "{} points per request, {} series, {} fields, {}{} ({})",
        p.points_per_request,
        p.series,
        p.fields,
        p.format.as_str(),
        if p.gzip { "+gzip" } else { "" },
        match p.source {
            PayloadSource::Spec => "as the spec says",
            PayloadSource::Traffic => "as the tenant's traffic",
            PayloadSource::Defaults => "defaults: no traffic yet",
        }
    )
}

/// Decides, given what is wanted (`None`: calibration off), the status as it stands, the
/// calibration pods that exist, and the time.
pub fn decide(
    want: Option<&Want>,
    prev: Option<&CalibrationStatus>,
    pods: &[PodView],
    now: &Time,
) -> Decision {
    let live: Vec<&PodView> = pods.iter().filter(|p| !p.deleting).collect();
    let Some(want) = want else {
        // Switched off: nothing runs; a calibration cut short says so.
        let status = prev
            .filter(|p| p.phase == CalibrationPhase::Running)
            .map(|p| CalibrationStatus {
                phase: CalibrationPhase::Failed,
                finished_at: Some(now.clone()),
                message: Some("stopped: calibration was switched off".into()),
                ..p.clone()
            });
        return Decision {
            delete: live.iter().map(|p| p.name.clone()).collect(),
            status,
            ..Default::default()
        };
    };
    let (current, stale): (Vec<&PodView>, Vec<&PodView>) =
        live.into_iter().partition(|p| p.hash == want.capacity_hash);
    // Pods of an older capacity measure something that no longer runs.
    let mut delete: Vec<String> = stale.iter().map(|p| p.name.clone()).collect();
    let this = prev.filter(|p| p.capacity_hash == want.capacity_hash);
    let settled = this.is_some_and(|p| p.phase != CalibrationPhase::Running);
    if let Some((pod, extra)) = current.split_first() {
        delete.extend(extra.iter().map(|p| p.name.clone()));
        if settled {
            // Reported already; only its removal failed before.
            delete.push(pod.name.clone());
            return Decision {
                delete,
                ..Default::default()
            };
        }
        let running = CalibrationStatus {
            capacity_hash: want.capacity_hash.clone(),
            phase: CalibrationPhase::Running,
            pod: Some(pod.name.clone()),
            started_at: this
                .filter(|p| p.pod.as_deref() == Some(pod.name.as_str()))
                .and_then(|p| p.started_at.clone())
                .or(Some(now.clone())),
            finished_at: None,
            points_per_second: None,
            p95_at_knee: None,
            payload: this
                .and_then(|p| p.payload.clone())
                .or(Some(want.payload.clone())),
            message: None,
        };
        return match outcome(pod, want.timeout) {
            Outcome::Running => Decision {
                delete,
                status: (this != Some(&running)).then_some(running),
                busy: true,
                ..Default::default()
            },
            Outcome::Found(found) => {
                delete.push(pod.name.clone());
                let p95 = found.p95_ms.map(|p| format!("{}ms", p.round()));
                let note = format!(
                    "knee {:.0} points/s per pod (p95 {}) with {}: {}",
                    found.knee_pps,
                    p95.as_deref().unwrap_or("unknown"),
                    running.payload.as_ref().map(describe).unwrap_or_default(),
                    found.summary
                );
                Decision {
                    delete,
                    status: Some(CalibrationStatus {
                        phase: CalibrationPhase::Succeeded,
                        finished_at: Some(now.clone()),
                        points_per_second: Some(found.knee_pps.round()),
                        p95_at_knee: p95,
                        message: Some(found.summary),
                        ..running
                    }),
                    note: Some(Note {
                        type_: EventType::Normal,
                        reason: "Calibrated",
                        message: note,
                    }),
                    ..Default::default()
                }
            }
            Outcome::Failed(why) => {
                delete.push(pod.name.clone());
                Decision {
                    delete,
                    status: Some(CalibrationStatus {
                        phase: CalibrationPhase::Failed,
                        finished_at: Some(now.clone()),
                        message: Some(why.clone()),
                        ..running
                    }),
                    note: Some(Note {
                        type_: EventType::Warning,
                        reason: "CalibrationFailed",
                        message: format!(
                            "{why}; the knee comes from live traffic until the capacity changes \
                             or the {RECALIBRATE_ANNOTATION} annotation does"
                        ),
                    }),
                    ..Default::default()
                }
            }
        };
    }
    let start = match this {
        None => true,
        Some(p) => match p.phase {
            // Its pod is gone without a word (deleted by hand, or lost with its node).
            CalibrationPhase::Running => {
                return Decision {
                    delete,
                    status: Some(CalibrationStatus {
                        phase: CalibrationPhase::Failed,
                        finished_at: Some(now.clone()),
                        message: Some("the calibration pod disappeared before it reported".into()),
                        ..p.clone()
                    }),
                    note: Some(Note {
                        type_: EventType::Warning,
                        reason: "CalibrationFailed",
                        message: format!(
                            "the calibration pod {} disappeared before it reported",
                            p.pod.as_deref().unwrap_or("?")
                        ),
                    }),
                    ..Default::default()
                };
            }
            CalibrationPhase::Succeeded => p
                .payload
                .as_ref()
                .is_some_and(|done| drifted(done, &want.payload)),
            CalibrationPhase::Failed => false,
        },
    };
    if !start {
        return Decision {
            delete,
            ..Default::default()
        };
    }
    let why = match this {
        Some(_) => "the traffic no longer looks like what the last calibration sent",
        None if prev.is_some() => "what sets a pod's capacity changed",
        None => "the tenant has no calibration yet",
    };
    Decision {
        delete,
        create: true,
        status: Some(CalibrationStatus {
            capacity_hash: want.capacity_hash.clone(),
            phase: CalibrationPhase::Running,
            pod: None,
            started_at: Some(now.clone()),
            finished_at: None,
            points_per_second: None,
            p95_at_knee: None,
            payload: Some(want.payload.clone()),
            message: None,
        }),
        note: Some(Note {
            type_: EventType::Normal,
            reason: "Calibrating",
            message: format!(
                "{why}: measuring one pod's knee with a scratch pod ({}; at most {}s)",
                describe(&want.payload),
                want.timeout.as_secs()
            ),
        }),
        busy: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::want::want;
    use crate::testing::{autoscaled, tenant, traffic};
    use k8s_openapi::chrono::{TimeZone, Utc};

    fn now() -> Time {
        Time(
            Utc.timestamp_opt(1_800_000_000, 0)
                .single()
                .unwrap_or_default(),
        )
    }

    fn wanted() -> Want {
        want(&tenant(autoscaled()), Duration::from_secs(300)).unwrap_or_else(|| panic!("on"))
    }

    fn pod(hash: &str, load: Load) -> PodView {
        PodView {
            name: "acme-calibration-x1".into(),
            hash: hash.into(),
            age_s: 30.0,
            deleting: false,
            load,
            server_stopped: None,
            failed: None,
        }
    }

    const KNEE: &str = r#"{"knee_pps":160000.0,"knee_p95_ms":41.2,"p95_limit_ms":103.0,"mode":"search","points_per_request":5000,"series":1000,"fields":5,"format":"lp","gzip":false,"steps":[[10000.0,10000.0,40.9,0,0,1],[160000.0,160000.0,41.2,0,0,1],[320000.0,250000.0,900.0,3,0,0]]}"#;

    #[test]
    fn a_new_tenant_starts_one_and_a_running_pod_is_waited_for() {
        let w = wanted();
        let d = decide(Some(&w), None, &[], &now());
        assert!(d.create && d.busy && d.delete.is_empty());
        let st = d.status.unwrap_or_else(|| panic!("status"));
        assert_eq!(st.phase, CalibrationPhase::Running);
        assert_eq!(st.capacity_hash, w.capacity_hash);
        let note = d.note.unwrap_or_else(|| panic!("event"));
        assert_eq!(note.reason, "Calibrating");
        assert!(
            note.message.contains("no calibration yet"),
            "{}",
            note.message
        );
        // The stage created the pod and recorded its name; the pod runs: nothing changes.
        let st = CalibrationStatus {
            pod: Some("acme-calibration-x1".into()),
            ..st
        };
        let running = pod(&w.capacity_hash, Load::Running);
        let d = decide(Some(&w), Some(&st), std::slice::from_ref(&running), &now());
        assert_eq!(
            d,
            Decision {
                busy: true,
                ..Default::default()
            }
        );
        // Past its timeout (and the grace) it fails and goes.
        let late = PodView {
            age_s: 331.0,
            ..running
        };
        let d = decide(Some(&w), Some(&st), &[late], &now());
        assert_eq!(d.delete, ["acme-calibration-x1"]);
        let st = d.status.unwrap_or_else(|| panic!("status"));
        assert_eq!(st.phase, CalibrationPhase::Failed);
        assert!(
            st.message
                .as_deref()
                .unwrap_or("")
                .contains("within the timeout of 300s"),
            "{st:?}"
        );
        assert_eq!(d.note.map(|n| n.reason), Some("CalibrationFailed"));
    }

    #[test]
    fn a_finished_ramp_is_recorded_announced_and_removed() {
        let w = wanted();
        let st = decide(Some(&w), None, &[], &now())
            .status
            .unwrap_or_else(|| panic!("status"));
        let done = pod(
            &w.capacity_hash,
            Load::Exited {
                code: 0,
                message: KNEE.into(),
            },
        );
        let d = decide(Some(&w), Some(&st), &[done], &now());
        assert_eq!(d.delete, ["acme-calibration-x1"]);
        assert!(!d.busy && !d.create);
        let st = d.status.unwrap_or_else(|| panic!("status"));
        assert_eq!(st.phase, CalibrationPhase::Succeeded);
        assert_eq!(st.points_per_second, Some(160_000.0));
        assert_eq!(st.p95_at_knee.as_deref(), Some("41ms"));
        assert_eq!(st.pod.as_deref(), Some("acme-calibration-x1"));
        assert_eq!(st.finished_at, Some(now()));
        let note = d.note.unwrap_or_else(|| panic!("event"));
        assert_eq!((note.type_, note.reason), (EventType::Normal, "Calibrated"));
        assert!(
            note.message
                .starts_with("knee 160000 points/s per pod (p95 41ms)"),
            "{}",
            note.message
        );
        // Settled: a leftover pod of this hash is removed, nothing starts again.
        let leftover = pod(&w.capacity_hash, Load::Running);
        let d = decide(Some(&w), Some(&st), &[leftover], &now());
        assert_eq!((d.delete.len(), d.create, d.status), (1, false, None));
        assert_eq!(
            decide(Some(&w), Some(&st), &[], &now()),
            Decision::default()
        );
    }

    #[test]
    fn failures_say_why() {
        let w = wanted();
        let st = decide(Some(&w), None, &[], &now()).status;
        let cases = [
            (
                Load::Exited {
                    code: 1,
                    message: "sluice-load: 127.0.0.1:8086 was not ready within 60s".into(),
                },
                Some("OOMKilled"),
                "exited with code 1 (the server container stopped: OOMKilled): sluice-load",
            ),
            (
                Load::Exited {
                    code: 0,
                    message: r#"{"knee_pps":null,"p95_limit_ms":250.0,"steps":[[10000.0,900.0,null,5,5,0]]}"#.into(),
                },
                None,
                "no step met the knee rule",
            ),
            (
                Load::Exited {
                    code: 0,
                    message: "not json".into(),
                },
                None,
                "not the load generator's summary",
            ),
        ];
        for (load, server, want_msg) in cases {
            let mut p = pod(&w.capacity_hash, load);
            p.server_stopped = server.map(String::from);
            let d = decide(Some(&w), st.as_ref(), &[p], &now());
            let msg = d.status.and_then(|s| s.message).unwrap_or_default();
            assert!(msg.contains(want_msg), "{msg}");
            // A failure is not retried for the same capacity.
        }
        let failed = CalibrationStatus {
            phase: CalibrationPhase::Failed,
            ..st.unwrap_or_else(|| panic!("status"))
        };
        assert_eq!(
            decide(Some(&w), Some(&failed), &[], &now()),
            Decision::default()
        );
        let mut evicted = pod(&w.capacity_hash, Load::Running);
        evicted.failed = Some("DeadlineExceeded".into());
        let d = decide(Some(&w), None, &[evicted], &now());
        assert_eq!(d.status.map(|s| s.phase), Some(CalibrationPhase::Failed));
    }

    #[test]
    fn a_capacity_change_replaces_the_pod_and_a_vanished_pod_fails() {
        let w = wanted();
        let old = CalibrationStatus {
            capacity_hash: "old".into(),
            phase: CalibrationPhase::Running,
            pod: Some("acme-calibration-old".into()),
            started_at: Some(now()),
            finished_at: None,
            points_per_second: None,
            p95_at_knee: None,
            payload: None,
            message: None,
        };
        let mut stale = pod("old", Load::Running);
        stale.name = "acme-calibration-old".into();
        let d = decide(Some(&w), Some(&old), &[stale], &now());
        assert_eq!(d.delete, ["acme-calibration-old"]);
        assert!(d.create);
        assert!(d
            .note
            .map(|n| n.message)
            .unwrap_or_default()
            .starts_with("what sets a pod's capacity changed"));
        // The current hash running with no pod left: failed, said so, not retried.
        let mine = CalibrationStatus {
            capacity_hash: w.capacity_hash.clone(),
            ..old
        };
        let d = decide(Some(&w), Some(&mine), &[], &now());
        assert!(!d.create);
        assert_eq!(d.status.map(|s| s.phase), Some(CalibrationPhase::Failed));
        // Being deleted already: not counted.
        let mut going = pod(&w.capacity_hash, Load::Running);
        going.deleting = true;
        assert!(decide(Some(&w), None, &[going], &now()).create);
    }

    #[test]
    fn switching_it_off_removes_the_pod_and_ends_the_run() {
        let w = wanted();
        let st = decide(Some(&w), None, &[], &now()).status;
        let d = decide(
            None,
            st.as_ref(),
            &[pod(&w.capacity_hash, Load::Running)],
            &now(),
        );
        assert_eq!(d.delete, ["acme-calibration-x1"]);
        let st = d.status.unwrap_or_else(|| panic!("status"));
        assert_eq!(st.phase, CalibrationPhase::Failed);
        assert!(!d.create && !d.busy);
        // A settled result stays as it is.
        assert_eq!(decide(None, Some(&st), &[], &now()), Decision::default());
    }

    #[test]
    fn traffic_of_another_shape_calibrates_again() {
        let w = wanted();
        let st = decide(Some(&w), None, &[], &now()).status;
        let done = CalibrationStatus {
            phase: CalibrationPhase::Succeeded,
            ..st.unwrap_or_else(|| panic!("status"))
        };
        let mut t = tenant(autoscaled());
        t.status = Some(crate::crd::IngestTenantStatus {
            traffic: Some(traffic(500)),
            ..Default::default()
        });
        let now_wanted = want(&t, Duration::from_secs(300)).unwrap_or_else(|| panic!("on"));
        assert_eq!(now_wanted.capacity_hash, w.capacity_hash);
        let d = decide(Some(&now_wanted), Some(&done), &[], &now());
        assert!(d.create);
        assert!(d
            .note
            .map(|n| n.message)
            .unwrap_or_default()
            .starts_with("the traffic no longer looks like"));
    }
}
