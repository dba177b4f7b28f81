//! The reconciler's scale-down stage: however `spec.replicas` went down (`kubectl scale`, an
//! edit, the autoscaler, KEDA or an HPA through `/scale`), the StatefulSet loses its highest
//! pod only once that pod has handed all its data to a pod that stays, one pod at a time.
//!
//! Level-triggered: every reconcile asks the leaving pod where it is (`GET /decommission`)
//! and acts on the answer, so an operator restarted at any moment carries on where the pod
//! is; the pod keeps its own progress on its volume. The leaving pod hands its data to the
//! pod `ordinal % desired`, so that several pods leaving spread their data over those that
//! stay. Raising the replicas again cancels a decommission (`DELETE /decommission`), and a
//! pod that comes back on a volume it once emptied is returned to service the same way.
//! Scaling to zero hands nothing over: there is no pod to receive, and the volumes keep it
//! all (as `spec.storage` keeps them).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;
use serde::Deserialize;

use crate::builders;
use crate::controller::{Context, Error};
use crate::crd::{DecommissionStatus, HandoffProgress, IngestTenant};
use crate::validate::{ValidTenant, CLUSTER_TOKEN_FILE, HTTP_PORT};

const PATH: &str = "/decommission";
const TIMEOUT: Duration = Duration::from_secs(5);

/// What a pod says of its decommission.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Report {
    pub phase: String,
    #[serde(default)]
    pub handoff: Option<Progress>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Progress {
    #[serde(flatten)]
    pub counts: HandoffProgress,
    #[serde(default)]
    pub refused: Option<String>,
    #[serde(default)]
    pub last_error: Option<String>,
}

/// What the StatefulSet runs while a scale-down is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No decommission: run `replicas`.
    Run { replicas: i32 },
    /// Keep `keep` pods while pod `ordinal` hands its data to pod `receiver`; `start` when it
    /// has not been asked yet.
    Leave {
        keep: i32,
        ordinal: i32,
        receiver: i32,
        start: bool,
    },
    /// The leaving pod is empty: run one pod fewer.
    Shrink { to: i32 },
}

/// The pure rule: `desired` replicas, `current` in the StatefulSet (`None`: none yet), and
/// what the highest pod reports (`None`: it does not answer).
pub fn decide(desired: i32, current: Option<i32>, leaving: Option<&Report>) -> Plan {
    let Some(current) = current else {
        return Plan::Run { replicas: desired };
    };
    if desired >= current || desired <= 0 {
        return Plan::Run { replicas: desired };
    }
    let ordinal = current - 1;
    match leaving.map(|r| r.phase.as_str()) {
        Some("empty") => Plan::Shrink { to: ordinal },
        phase => Plan::Leave {
            keep: current,
            ordinal,
            receiver: ordinal % desired,
            start: phase == Some("none"),
        },
    }
}

/// Why the stage keeps the pods as they are, for the Degraded condition.
pub fn refusal(r: &Report) -> Option<String> {
    r.handoff.as_ref()?.refused.clone()
}

/// What the stage decided: the replicas to build the StatefulSet with, and what to report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub replicas: i32,
    pub status: Option<DecommissionStatus>,
    /// The receiver refuses the data (no room, a field of another type).
    pub refused: Option<String>,
    /// A decommission is under way: look again soon.
    pub busy: bool,
}

/// Runs the stage for `v` (whose `replicas` is the desired count).
pub async fn stage(
    tenant: &IngestTenant,
    ctx: &Context,
    v: &ValidTenant,
) -> Result<Outcome, Error> {
    let sts = crate::controller::existing_stateful_set(tenant, ctx).await?;
    let Some(current) = sts.and_then(|s| s.spec.and_then(|s| s.replicas)) else {
        // A new tenant: no pod to decommission or return to service.
        return Ok(Outcome {
            replicas: v.replicas,
            ..Default::default()
        });
    };
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &v.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&builders::selector_string(&v.name)))
        .await?
        .items;
    let staying = current.min(v.replicas);
    let leaving = v.replicas < current && v.replicas > 0;
    // The pod this stage was decommissioning, if it now stays: asked at once, since its
    // readiness probe may not have noticed yet that it stopped taking writes.
    let recorded = tenant
        .status
        .as_ref()
        .and_then(|s| s.decommission.as_ref())
        .map(|d| d.ordinal);
    let returning: Vec<&Pod> = (0..staying)
        .filter_map(|o| {
            let pod = listed.iter().find(|p| p.name_any() == pod_name(v, o))?;
            (!is_ready(pod) || recorded == Some(o)).then_some(pod)
        })
        .collect();
    // The token is read only when a pod has to be asked.
    let token = if leaving || !returning.is_empty() {
        cluster_token(ctx, v).await?
    } else {
        None
    };
    return_to_service(tenant, ctx, &returning, token.as_deref()).await;

    let leaving_ip = pod_ip(&listed, &pod_name(v, current - 1));
    let report = match (&leaving_ip, &token) {
        (Some(ip), Some(t)) if leaving => match get(ip, t).await {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::debug!(error = %e, "the leaving pod does not answer");
                None
            }
        },
        _ => None,
    };
    match decide(v.replicas, Some(current), report.as_ref()) {
        Plan::Run { replicas } => Ok(Outcome {
            replicas,
            ..Default::default()
        }),
        Plan::Shrink { to } => {
            let note = format!(
                "pod {} handed all its data over; the StatefulSet goes to {to} replicas",
                pod_name(v, to)
            );
            ctx.event(tenant, EventType::Normal, "Decommissioned", "Scale", note)
                .await;
            Ok(Outcome {
                replicas: to,
                busy: to > v.replicas,
                ..Default::default()
            })
        }
        Plan::Leave {
            keep,
            ordinal,
            receiver,
            start,
        } => {
            let mut message = None;
            if start {
                if let (Some(ip), Some(t)) = (&leaving_ip, &token) {
                    let to = builders::peer_address(v, receiver);
                    match send(ip, t, "POST", &format!("{PATH}?to={to}")).await {
                        Ok(_) => {
                            let note = format!(
                                "pod {} hands its data to pod {} before the StatefulSet shrinks",
                                pod_name(v, ordinal),
                                pod_name(v, receiver)
                            );
                            ctx.event(tenant, EventType::Normal, "Decommissioning", "Scale", note)
                                .await;
                        }
                        Err(e) => message = Some(e),
                    }
                }
            }
            if token.is_none() {
                message = Some("the tenant's cluster Secret has no token yet".into());
            } else if report.is_none() {
                message = Some(format!("pod {} does not answer", pod_name(v, ordinal)));
            }
            let progress = report
                .as_ref()
                .and_then(|r| r.handoff.clone())
                .unwrap_or_default();
            let refused = report.as_ref().and_then(refusal);
            if message.is_none() {
                message = progress.last_error.clone();
            }
            Ok(Outcome {
                replicas: keep,
                status: Some(DecommissionStatus {
                    ordinal,
                    receiver,
                    phase: report.map(|r| r.phase).unwrap_or_else(|| "unknown".into()),
                    progress: progress.counts,
                    message,
                }),
                refused,
                busy: true,
            })
        }
    }
}

/// Pods that stay but still refuse writes from a decommission (cancelled by a scale-up, or
/// brought back on a volume they once emptied) take writes again. Only the staying pods that
/// are not ready, or were leaving until now, are asked (`pods`): a decommissioned pod never is
/// ready.
async fn return_to_service(
    tenant: &IngestTenant,
    ctx: &Context,
    pods: &[&Pod],
    token: Option<&str>,
) {
    let Some(token) = token else {
        return;
    };
    for pod in pods {
        let name = pod.name_any();
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let Ok(report) = get(&ip, token).await else {
            continue;
        };
        if report.phase == "none" || report.phase == "cancelling" {
            continue;
        }
        match send(&ip, token, "DELETE", PATH).await {
            Ok(_) => {
                let note = format!("pod {name} stays in the tenant: its decommission is cancelled");
                ctx.event(
                    tenant,
                    EventType::Normal,
                    "DecommissionCancelled",
                    "Scale",
                    note,
                )
                .await;
            }
            Err(e) => tracing::warn!(pod = name, error = %e, "cannot cancel a decommission"),
        }
    }
}

fn pod_name(v: &ValidTenant, ordinal: i32) -> String {
    format!("{}-{ordinal}", v.name)
}

fn pod_ip(pods: &[Pod], name: &str) -> Option<String> {
    pods.iter()
        .find(|p| p.name_any() == name)?
        .status
        .as_ref()?
        .pod_ip
        .clone()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn cluster_token(ctx: &Context, v: &ValidTenant) -> Result<Option<String>, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &v.namespace);
    let secret = secrets
        .get_opt(&builders::cluster_secret_name(&v.name))
        .await?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(CLUSTER_TOKEN_FILE).cloned())
        .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
        .filter(|t| !t.is_empty()))
}

async fn get(ip: &str, token: &str) -> Result<Report, String> {
    let body = send(ip, token, "GET", PATH).await?;
    serde_json::from_str(&body).map_err(|e| format!("{ip}: {PATH}: {e}"))
}

async fn send(ip: &str, token: &str, method: &str, path: &str) -> Result<String, String> {
    let addr = format!("{ip}:{HTTP_PORT}");
    match crate::pod_http::request(&addr, method, path, Some(token), TIMEOUT).await? {
        (200..=299, body) => Ok(body),
        (code, body) => Err(format!("{method} {path} on {addr}: {code} {body}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(phase: &str) -> Report {
        Report {
            phase: phase.into(),
            handoff: None,
        }
    }

    #[test]
    fn the_highest_pod_leaves_first_and_the_set_shrinks_only_when_it_is_empty() {
        // Nothing to do: no StatefulSet yet, scaling up, steady, or to zero.
        assert_eq!(decide(3, None, None), Plan::Run { replicas: 3 });
        assert_eq!(decide(3, Some(1), None), Plan::Run { replicas: 3 });
        assert_eq!(decide(2, Some(2), None), Plan::Run { replicas: 2 });
        assert_eq!(decide(0, Some(3), None), Plan::Run { replicas: 0 });
        // 3 -> 1: pod 2 leaves first, to pod 0; it is asked once it says it is not leaving.
        assert_eq!(
            decide(1, Some(3), Some(&report("none"))),
            Plan::Leave {
                keep: 3,
                ordinal: 2,
                receiver: 0,
                start: true
            }
        );
        for phase in ["draining", "handing_over", "finishing", "refused"] {
            assert_eq!(
                decide(1, Some(3), Some(&report(phase))),
                Plan::Leave {
                    keep: 3,
                    ordinal: 2,
                    receiver: 0,
                    start: false
                },
                "{phase}"
            );
        }
        // A pod that does not answer is not skipped: the set keeps it.
        assert_eq!(
            decide(1, Some(3), None),
            Plan::Leave {
                keep: 3,
                ordinal: 2,
                receiver: 0,
                start: false
            }
        );
        assert_eq!(
            decide(1, Some(3), Some(&report("empty"))),
            Plan::Shrink { to: 2 }
        );
        // 4 -> 2: pods 3 and 2 spread their data over pods 1 and 0.
        let leave = |current| match decide(2, Some(current), Some(&report("none"))) {
            Plan::Leave { receiver, .. } => receiver,
            other => panic!("{other:?}"),
        };
        assert_eq!((leave(4), leave(3)), (1, 0));
    }

    #[test]
    fn a_pods_answer_reads_as_a_report() {
        let r: Report = serde_json::from_str(
            r#"{"phase":"handing_over","since_unix_seconds":1,"handoff":{"id":5,"receiver":"a:1","tables":4,"tables_handed":1,"rows_planned":100,"rows_copied":40,"refused":"no room","last_error":null}}"#,
        )
        .unwrap();
        assert_eq!(r.phase, "handing_over");
        assert_eq!(r.handoff.as_ref().unwrap().counts.rows_copied, 40);
        assert_eq!(refusal(&r).as_deref(), Some("no room"));
        let none: Report = serde_json::from_str(r#"{"phase":"none"}"#).unwrap();
        assert_eq!(refusal(&none), None);
    }
}
