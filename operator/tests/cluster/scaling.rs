//! Replicas: the `/scale` subresource within bounds, and scale-down through decommission.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_operator::crd::IngestTenant;

use crate::harness::*;

#[tokio::test]
async fn scale_subresource_drives_replicas_within_bounds() {
    with_harness("scale", true, |h| {
        Box::pin(async move {
            h.create_tenant("acme", json!({
                "replicas": 1, "scaling": {"minReplicas": 1, "maxReplicas": 3}, "scheduling": unschedulable()
            }))
            .await;
            let api = h.api::<IngestTenant>();
            let stss = h.api::<StatefulSet>();
            let replicas = |want: i32| {
                let stss = stss.clone();
                async move {
                    wait_for(&format!("StatefulSet replicas {want}"), || async {
                        let s = stss.get("acme").await.ok()?;
                        (s.spec?.replicas == Some(want)).then_some(())
                    })
                    .await
                }
            };
            replicas(1).await;
            // What `kubectl scale ingesttenant/acme --replicas=2` does.
            api.patch_scale("acme", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 2}})))
                .await
                .expect("scale");
            replicas(2).await;
            // The pods learn the new replica count from their peer list, without a restart.
            let cms = h.api::<ConfigMap>();
            let peers = wait_for("peer list of 2", || async {
                let cm = cms.get_opt("acme-peers").await.ok().flatten()?;
                let list = cm.data?.remove("peers")?;
                (list.lines().count() == 2).then_some(list)
            })
            .await;
            assert!(peers.starts_with("acme-0.acme-headless."), "{peers}");
            let ev = h.wait_event("acme", "Scaled").await;
            assert!(ev.note.unwrap_or_default().contains("from 1 to 2"));
            let scale = wait_for("the scale status", || async {
                let s = api.get_scale("acme").await.ok()?;
                (s.status.as_ref()?.replicas == 2).then_some(s)
            })
            .await;
            assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
            assert_eq!(
                scale.status.and_then(|s| s.selector).as_deref(),
                Some("app.kubernetes.io/instance=acme,app.kubernetes.io/name=sluice-server")
            );
            // Beyond the bounds: clamped, and the operator says so.
            api.patch_scale("acme", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 7}})))
                .await
                .expect("scale");
            replicas(3).await;
            let ev = h.wait_event("acme", "ReplicasClamped").await;
            assert_eq!(ev.type_.as_deref(), Some("Warning"));
            assert!(ev.note.unwrap_or_default().contains("spec.replicas 7 is outside spec.scaling"));
        })
    })
    .await;
}

/// The decommission stage against the real API server, with pods that never start (so none
/// answers): a scale-down records which pod leaves and to whom, and the StatefulSet keeps every
/// pod, because only the leaving pod's own word that it is empty may shrink it; a restarted
/// operator picks the same stage up; raising the replicas again ends it; scaling to zero hands
/// nothing over. What the pods say while they hand their data over is covered on the real
/// cluster by e2e (`scale_down_*`, `scale_up_cancels_a_decommission`).
#[tokio::test]
async fn scale_down_keeps_a_pod_until_it_reports_itself_empty() {
    with_harness("decommission", true, |h| {
        Box::pin(async move {
            h.create_tenant(
                "acme",
                json!({
                    "replicas": 3, "scaling": {"minReplicas": 0, "maxReplicas": 3},
                    "scheduling": unschedulable()
                }),
            )
            .await;
            let api = h.api::<IngestTenant>();
            let stss = h.api::<StatefulSet>();
            let sts_replicas =
                || async { stss.get("acme").await.ok().and_then(|s| s.spec?.replicas) };
            wait_for("StatefulSet replicas 3", || async {
                (sts_replicas().await == Some(3)).then_some(())
            })
            .await;
            let scale = |n: i32| {
                let api = api.clone();
                async move {
                    api.patch_scale(
                        "acme",
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"spec": {"replicas": n}})),
                    )
                    .await
                    .expect("scale");
                }
            };
            let leaving = |t: &IngestTenant| t.status.as_ref().and_then(|s| s.decommission.clone());

            scale(1).await;
            let t = h
                .wait_status("acme", "status.decommission", |t| leaving(t).is_some())
                .await;
            let d = leaving(&t).expect("decommission status");
            assert_eq!((d.ordinal, d.receiver), (2, 0), "{d:?}");
            assert_eq!(d.phase, "unknown", "{d:?}");
            assert_eq!(d.message.as_deref(), Some("pod acme-2 does not answer"));
            // Several reconciles later the set still has every pod.
            h.wait_reconciles(3).await;
            assert_eq!(sts_replicas().await, Some(3));

            // An operator restart resumes the same stage from the cluster's state.
            h.stop_controller().await;
            h.start_controller();
            h.wait_reconciles(2).await;
            assert_eq!(sts_replicas().await, Some(3));
            let d = leaving(&h.tenant("acme").await).expect("still decommissioning");
            assert_eq!((d.ordinal, d.receiver), (2, 0));

            // Raising the replicas again ends it: no pod leaves.
            scale(3).await;
            h.wait_status("acme", "no decommission", |t| leaving(t).is_none())
                .await;
            h.wait_reconciles(2).await;
            assert_eq!(sts_replicas().await, Some(3));

            // To zero nothing is handed over (no pod would stay to take it).
            scale(0).await;
            wait_for("StatefulSet replicas 0", || async {
                (sts_replicas().await == Some(0)).then_some(())
            })
            .await;
            assert!(leaving(&h.tenant("acme").await).is_none());
        })
    })
    .await;
}
