//! The reconciler's calibration stage: one pod's knee, measured before live traffic says it.
//!
//! With `autoscaling.enabled` (and `autoscaling.calibration.enabled`, the default), a tenant
//! that has no calibration for what sets its pods' capacity (its capacity hash: image,
//! resources, pool, limits, p95 target, the calibration's settings, the
//! `sluice.dev/recalibrate` annotation), or whose traffic changed shape since, gets one
//! calibration pod ([`pod`]): its own image, resources and configuration on scratch volumes,
//! in no Service, running `sluice-load --search` against itself. The pod's load container
//! ends with the ramp's summary in its termination message ([`result`]); the stage records it
//! in `status.calibration`, says so in an Event (`Calibrating`, `Calibrated`,
//! `CalibrationFailed`) and removes the pod. A pod that outlives `calibration.timeout` is
//! removed and the calibration counts as failed.
//!
//! [`want`] says what a calibration should measure, [`plan`] what to do about the pods that
//! exist, [`pod`] builds the pod and [`result`] reads its report: all pure.
//!
//! Why the reconciler and not the autoscaler runs it: the reconciler is the only writer of
//! objects (the pod is an object of the tenant, like its StatefulSet), and it is already
//! level-triggered on the tenant and what it owns, so a calibration pod that finishes wakes it
//! (it watches pods with the calibration's labels). The autoscaler loop only reads the result
//! from `status.calibration`: a new result resets its knee estimate (see
//! [`crate::autoscale::run`]). This module is the I/O around the pure rules.

pub mod plan;
pub mod pod;
pub mod result;
pub mod want;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::events::EventType;
use kube::ResourceExt;
use tracing::info;

use crate::controller::{Context, Error};
use crate::crd::{CalibrationPhase, CalibrationStatus, IngestTenant};
use crate::validate::ValidTenant;
use plan::{Load, PodView};

/// What the stage leaves for the status.
#[derive(Debug, Default)]
pub struct Outcome {
    /// `status.calibration` as it should be now (as stored when nothing changed, so that a
    /// stale cached status is not written back); `None`: there is none.
    pub status: Option<CalibrationStatus>,
    /// A calibration is under way: look again soon.
    pub busy: bool,
}

/// How often a calibration under way is looked at (its pod's changes wake the reconciler
/// sooner).
pub const POLL: Duration = Duration::from_secs(10);

/// Runs the stage for a tenant whose objects are applied (the pod mounts its ConfigMap and
/// cluster Secret).
pub async fn stage(
    tenant: &IngestTenant,
    ctx: &Context,
    v: &ValidTenant,
) -> Result<Outcome, Error> {
    // The tenant as stored now, not as the controller's cache last saw it: right after this
    // stage wrote a result and removed the pod, the pod's deletion can wake a reconcile whose
    // cached tenant still says Running, which would read the pod's absence as a loss.
    let api: Api<IngestTenant> = Api::namespaced(ctx.client.clone(), &v.namespace);
    let fresh = api.get(&v.name).await?;
    let prev = fresh.status.as_ref().and_then(|s| s.calibration.clone());
    if fresh.metadata.generation != tenant.metadata.generation {
        // The spec moved on since this reconcile began: the next one builds from it.
        return Ok(Outcome {
            status: prev,
            busy: true,
        });
    }
    let timeout = sluice_core::config::parse_duration(&v.spec.autoscaling.calibration.timeout)
        .unwrap_or(Duration::from_secs(480));
    let want = want::want(&fresh, timeout);
    let prev = prev.as_ref();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &v.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&pod::selector(&v.name)))
        .await?
        .items;
    if want.is_none()
        && listed.is_empty()
        && prev.is_none_or(|p| p.phase != CalibrationPhase::Running)
    {
        return Ok(Outcome {
            status: prev.cloned(),
            busy: false,
        });
    }
    let now = Time(Utc::now());
    let views: Vec<PodView> = listed.iter().map(|p| view(p, &now)).collect();
    let mut d = plan::decide(want.as_ref(), prev, &views, &now);
    for name in &d.delete {
        match pods.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let (true, Some(w)) = (d.create, &want) {
        let p95 = sluice_core::config::parse_duration(&v.spec.autoscaling.p95_target)
            .map_or(250.0, |d| d.as_secs_f64() * 1000.0);
        let created = match pod::build(v, w, p95) {
            None => Err(
                "no database to write to: spec.databases is empty and autoCreateDatabases is false"
                    .to_string(),
            ),
            Some(p) => match pods.create(&PostParams::default(), &p).await {
                Ok(p) => Ok(p.name_any()),
                // Refused for good (RBAC, quota, admission): say so rather than retry forever.
                Err(kube::Error::Api(e)) if (400..500).contains(&e.code) && e.code != 409 => {
                    Err(format!("the calibration pod was refused: {}", e.message))
                }
                Err(e) => return Err(e.into()),
            },
        };
        match created {
            Ok(name) => {
                info!(tenant = %v.name, pod = %name, "calibrating");
                if let Some(st) = d.status.as_mut() {
                    st.pod = Some(name);
                }
            }
            Err(why) => {
                d.busy = false;
                d.note = Some(plan::Note {
                    type_: EventType::Warning,
                    reason: "CalibrationFailed",
                    message: why.clone(),
                });
                if let Some(st) = d.status.as_mut() {
                    st.phase = CalibrationPhase::Failed;
                    st.finished_at = Some(now.clone());
                    st.message = Some(why);
                }
            }
        }
    }
    if let Some(n) = d.note {
        ctx.event(tenant, n.type_, n.reason, "Calibrate", n.message)
            .await;
    }
    Ok(Outcome {
        status: d.status.or_else(|| prev.cloned()),
        busy: d.busy,
    })
}

fn container<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// What the stage needs to know of a calibration pod.
fn view(p: &Pod, now: &Time) -> PodView {
    let age_s = p
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0.0, |t| (now.0 - t.0).num_milliseconds() as f64 / 1000.0);
    let load = container(p, pod::LOAD_CONTAINER)
        .and_then(|c| c.state.as_ref()?.terminated.as_ref())
        .map_or(Load::Running, |t| Load::Exited {
            code: t.exit_code,
            message: t
                .message
                .clone()
                .or_else(|| t.reason.clone())
                .unwrap_or_default(),
        });
    let server_stopped = container(p, crate::builders::pod::SERVER_CONTAINER)
        .and_then(|c| c.state.as_ref()?.terminated.as_ref())
        .map(|t| {
            t.reason
                .clone()
                .unwrap_or_else(|| format!("exit code {}", t.exit_code))
        });
    let status = p.status.as_ref();
    let failed = status
        .filter(|s| s.phase.as_deref() == Some("Failed"))
        .map(|s| {
            s.reason
                .clone()
                .or_else(|| s.message.clone())
                .unwrap_or_else(|| "Failed".into())
        });
    PodView {
        name: p.name_any(),
        hash: p.labels().get(pod::HASH_LABEL).cloned().unwrap_or_default(),
        age_s,
        deleting: p.metadata.deletion_timestamp.is_some(),
        load,
        server_stopped,
        failed,
    }
}
