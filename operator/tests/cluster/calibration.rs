//! The calibration stage against the real API server, shown without a running pod: no kubelet
//! runs the tenant's unschedulable pods, so the test plays the kubelet's part and writes the
//! calibration pod's container states (the load generator's termination message) itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use sluice_operator::calibration::pod::{selector, HASH_LABEL, LOAD_CONTAINER};
use sluice_operator::cancel::cancel_pair;
use sluice_operator::controller::{Context, Options};
use sluice_operator::crd::{CalibrationPhase, IngestTenant, KneeSource, PayloadSource};
use sluice_operator::metrics::Metrics;

use crate::harness::*;

/// The load generator's summary of a ramp whose knee is 160,000 points/s at 41 ms.
const SUMMARY: &str = r#"{"knee_pps":160000.0,"knee_p95_ms":41.2,"p95_limit_ms":103.0,"mode":"search","points_per_request":5000,"series":1000,"fields":5,"format":"lp","gzip":false,"steps":[[10000.0,10000.0,40.9,0,0,1],[160000.0,160000.0,41.2,0,0,1],[320000.0,250000.0,900.0,3,0,0]]}"#;

/// A scraper for pods that are never Ready (it is never called).
struct Unreachable;

impl sluice_operator::autoscale::run::Scrape for Unreachable {
    fn scrape<'a>(
        &'a self,
        _pod: &'a Pod,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(async { Err("not running".to_string()) })
    }
}

/// The tenant's one calibration pod that is not being deleted, once there is one.
async fn calibration_pod(h: &Harness, hash: Option<&str>) -> Pod {
    let pods = h.api::<Pod>();
    wait_for("a calibration pod", || async {
        let l = pods
            .list(&ListParams::default().labels(&selector("acme")))
            .await
            .ok()?;
        l.items.into_iter().find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && hash.is_none_or(|h| p.labels().get(HASH_LABEL).map(String::as_str) == Some(h))
        })
    })
    .await
}

/// Plays the kubelet: the server runs, the load generator ended with `code` and `message`.
async fn finish(h: &Harness, pod: &str, code: i32, message: &str) {
    let terminated = |name: &str, code: i32, message: &str| {
        json!({"name": name, "image": "sluice-server:0.0.0-test", "imageID": "", "ready": false,
               "restartCount": 0, "started": false,
               "state": {"terminated": {"exitCode": code, "reason": "Completed", "message": message,
                                        "startedAt": "2026-11-26T10:00:00Z", "finishedAt": "2026-11-26T10:02:00Z"}}})
    };
    h.api::<Pod>()
        .patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "sluice-server", "image": "sluice-server:0.0.0-test", "imageID": "",
                     "ready": true, "restartCount": 0, "started": true,
                     "state": {"running": {"startedAt": "2026-11-26T10:00:00Z"}}},
                    terminated(LOAD_CONTAINER, code, message),
                ]
            }})),
        )
        .await
        .expect("pod status");
}

async fn gone(h: &Harness, name: &str) {
    let pods = h.api::<Pod>();
    wait_for(&format!("pod {name} removed"), || async {
        match pods.get_opt(name).await {
            Ok(None) => Some(()),
            Ok(Some(p)) => p.metadata.deletion_timestamp.map(|_| ()),
            Err(_) => None,
        }
    })
    .await;
}

/// With autoscaling on, a new tenant gets a calibration pod (its image, resources, mounts and
/// security; labels no Service of the tenant selects; owned by it); a finished ramp is
/// recorded in `status.calibration`, announced, becomes `status.knee` (source calibration) and
/// its pod goes; a capacity change calibrates again, a failed ramp says why and is not
/// retried, the recalibrate annotation runs it again, and switching it off removes the pod.
#[tokio::test]
async fn calibration_measures_a_new_tenant_and_each_capacity_change() {
    with_harness("calibration", true, |h| {
        Box::pin(async move {
            let t = h
                .create_tenant(
                    "acme",
                    json!({
                        "image": "sluice-server:0.0.0-test",
                        "replicas": 1,
                        "scaling": {"minReplicas": 1, "maxReplicas": 3},
                        "autoscaling": {"enabled": true, "p95Target": "200ms",
                                        "calibration": {"timeout": "4m"}},
                        "databases": [{"name": "telegraf"}],
                        "resources": {"limits": {"cpu": "300m", "memory": "1Gi"}},
                        "storage": {"size": "2Gi"},
                        "scheduling": unschedulable()
                    }),
                )
                .await;
            let uid = t.uid().expect("uid");
            let pod = calibration_pod(h, None).await;
            let name = pod.name_any();
            let labels = pod.labels().clone();
            assert_eq!(labels["app.kubernetes.io/name"], "sluice-calibration");
            assert_eq!(labels["app.kubernetes.io/instance"], "acme");
            assert_eq!(labels["app.kubernetes.io/component"], "calibration");
            let owner = &pod.owner_references()[0];
            assert_eq!(
                (owner.uid.as_str(), owner.controller),
                (uid.as_str(), Some(true))
            );
            // No Service of the tenant selects it.
            let svc = wait_for("Service acme", || async {
                h.api::<Service>().get_opt("acme").await.ok().flatten()
            })
            .await;
            let sel = svc.spec.and_then(|s| s.selector).unwrap_or_default();
            assert!(
                !sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
                "the Service {sel:?} selects the calibration pod {labels:?}"
            );
            // The server container runs as the tenant's pods do.
            let spec = pod.spec.clone().expect("spec");
            assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
            assert_eq!(spec.active_deadline_seconds, Some(240));
            let sts = wait_for("StatefulSet acme", || async {
                h.api::<k8s_openapi::api::apps::v1::StatefulSet>()
                    .get_opt("acme")
                    .await
                    .ok()
                    .flatten()
            })
            .await;
            let tmpl = sts.spec.and_then(|s| s.template.spec).expect("template");
            let (server, load) = (&spec.containers[0], &spec.containers[1]);
            assert_eq!(server.image, tmpl.containers[0].image);
            // (The API server defaults a pod's requests to its limits; a template is left alone.)
            let limits = |c: &k8s_openapi::api::core::v1::Container| {
                c.resources.as_ref().and_then(|r| r.limits.clone())
            };
            assert_eq!(limits(server), limits(&tmpl.containers[0]));
            assert_eq!(server.volume_mounts, tmpl.containers[0].volume_mounts);
            assert_eq!(load.name, LOAD_CONTAINER);
            let args = load.args.clone().unwrap_or_default().join(" ");
            assert!(args.contains("--db telegraf"), "{args}");
            assert!(args.contains("--p95-max 200ms"), "{args}");
            assert!(
                args.contains("--points 5000 --series 1000 --fields 5 --format lp"),
                "{args}"
            );
            let running = h
                .wait_status("acme", "status.calibration Running", |t| {
                    t.status
                        .as_ref()
                        .and_then(|s| s.calibration.as_ref())
                        .is_some_and(|c| {
                            c.phase == CalibrationPhase::Running
                                && c.pod.as_deref() == Some(name.as_str())
                        })
                })
                .await;
            let c = running
                .status
                .and_then(|s| s.calibration)
                .expect("calibration");
            let hash = c.capacity_hash.clone();
            assert_eq!(labels[HASH_LABEL], hash);
            assert_eq!(c.payload.map(|p| p.source), Some(PayloadSource::Defaults));
            let ev = h.wait_event("acme", "Calibrating").await;
            assert!(
                ev.note
                    .unwrap_or_default()
                    .contains("the tenant has no calibration yet"),
                "Calibrating note"
            );

            // The autoscaler reads what the calibration found.
            let options = Options {
                namespace: Some(h.ns.clone()),
                instance: format!("test-{}", h.ns),
                ..Options::default()
            };
            let ctx = Context::new(h.client.clone(), Metrics::new().expect("metrics"), options);
            let (stop, cancel) = cancel_pair();
            let task = tokio::spawn(sluice_operator::autoscale::run::run(
                ctx,
                Arc::new(Unreachable),
                Duration::from_millis(300),
                async move { cancel.cancelled().await },
            ));

            // The ramp finishes: recorded, announced, the pod removed, the knee set.
            finish(h, &name, 0, SUMMARY).await;
            let done = h
                .wait_status(
                    "acme",
                    "status.calibration Succeeded and status.knee",
                    |t| {
                        let s = t.status.as_ref();
                        s.and_then(|s| s.calibration.as_ref())
                            .is_some_and(|c| c.phase == CalibrationPhase::Succeeded)
                            && s.and_then(|s| s.knee.as_ref()).is_some()
                    },
                )
                .await;
            let st = done.status.expect("status");
            let c = st.calibration.expect("calibration");
            assert_eq!(c.points_per_second, Some(160_000.0));
            assert_eq!(c.p95_at_knee.as_deref(), Some("41ms"));
            assert!(c.finished_at.is_some());
            let knee = st.knee.expect("knee");
            // Without live evidence the calibration's knee stands as measured.
            assert_eq!(knee.points_per_second, 160_000.0, "{knee:?}");
            assert_eq!(knee.source, Some(KneeSource::Calibration));
            assert_eq!(knee.p95_at_knee.as_deref(), Some("41ms"));
            let (measured, finished) = (
                knee.measured_at.map_or(0, |t| t.0.timestamp()),
                c.finished_at.map_or(0, |t| t.0.timestamp()),
            );
            assert!((measured - finished).abs() <= 1, "{measured} vs {finished}");
            let ev = h.wait_event("acme", "Calibrated").await;
            let note = ev.note.unwrap_or_default();
            assert!(
                note.starts_with("knee 160000 points/s per pod (p95 41ms)"),
                "{note}"
            );
            gone(h, &name).await;
            // Nothing starts again while the capacity stays.
            h.wait_reconciles(2).await;
            let pods = h.api::<Pod>();
            let left = pods
                .list(&ListParams::default().labels(&selector("acme")))
                .await
                .expect("list");
            assert!(
                left.items
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_some()),
                "a calibration pod came back"
            );

            // A capacity change (the CPU limit): calibrated again, under a new hash.
            let api = h.api::<IngestTenant>();
            api.patch(
                "acme",
                &PatchParams::default(),
                &Patch::Merge(
                    &json!({"spec": {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}}),
                ),
            )
            .await
            .expect("patch");
            let again = wait_for("a calibration pod of the new capacity", || async {
                let p = calibration_pod(h, None).await;
                (p.labels().get(HASH_LABEL) != Some(&hash)).then_some(p)
            })
            .await;
            let new_hash = again.labels()[HASH_LABEL].clone();
            let limits = again.spec.as_ref().and_then(|s| {
                s.containers[0]
                    .resources
                    .as_ref()?
                    .limits
                    .as_ref()?
                    .get("cpu")
                    .cloned()
            });
            assert_eq!(limits.map(|q| q.0), Some("500m".into()));
            // It fails: the status and a Warning say why; it is not retried.
            finish(
                h,
                &again.name_any(),
                1,
                "sluice-load: 127.0.0.1:8086 was not ready within 120s",
            )
            .await;
            let failed = h
                .wait_status("acme", "status.calibration Failed", |t| {
                    t.status
                        .as_ref()
                        .and_then(|s| s.calibration.as_ref())
                        .is_some_and(|c| c.phase == CalibrationPhase::Failed)
                })
                .await;
            let c = failed
                .status
                .and_then(|s| s.calibration)
                .expect("calibration");
            assert_eq!(c.capacity_hash, new_hash);
            let msg = c.message.unwrap_or_default();
            assert!(
                msg.contains("exited with code 1") && msg.contains("not ready within 120s"),
                "{msg}"
            );
            let warning = h.wait_event("acme", "CalibrationFailed").await;
            assert_eq!(warning.type_.as_deref(), Some("Warning"));
            gone(h, &again.name_any()).await;
            h.wait_reconciles(2).await;
            assert_eq!(
                pods.list(&ListParams::default().labels(&selector("acme")))
                    .await
                    .expect("list")
                    .items
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .count(),
                0,
                "a failed calibration is not retried for the same capacity"
            );

            // The annotation asks for another; switching calibration off removes it.
            api.patch(
                "acme",
                &PatchParams::default(),
                &Patch::Merge(
                    &json!({"metadata": {"annotations": {"sluice.dev/recalibrate": "1"}}}),
                ),
            )
            .await
            .expect("annotate");
            let third = calibration_pod(h, None).await;
            assert_ne!(third.labels()[HASH_LABEL], new_hash);
            api.patch(
                "acme",
                &PatchParams::default(),
                &Patch::Merge(
                    &json!({"spec": {"autoscaling": {"calibration": {"enabled": false}}}}),
                ),
            )
            .await
            .expect("switch off");
            gone(h, &third.name_any()).await;
            let off = h
                .wait_status("acme", "the cut-short calibration Failed", |t| {
                    t.status
                        .as_ref()
                        .and_then(|s| s.calibration.as_ref())
                        .is_some_and(|c| {
                            c.phase == CalibrationPhase::Failed
                                && c.message
                                    .as_deref()
                                    .is_some_and(|m| m.contains("switched off"))
                        })
                })
                .await;
            // The knee the autoscaler had stays.
            assert_eq!(
                off.status.and_then(|s| s.knee).and_then(|k| k.source),
                Some(KneeSource::Calibration)
            );
            stop.cancel();
            let _ = task.await;
        })
    })
    .await;
}
