//! An unchanged tenant writes nothing, and an operator restart keeps the pods.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::ResourceExt;
use sluice_operator::crd::IngestTenant;
use sluice_operator::metrics::Metrics;

use crate::harness::*;

/// Resource versions of everything the operator writes for tenant `acme`.
async fn versions(h: &Harness) -> Vec<(String, Option<String>)> {
    vec![
        (
            "tenant".into(),
            h.api::<IngestTenant>()
                .get("acme")
                .await
                .expect("tenant")
                .resource_version(),
        ),
        (
            "configmap".into(),
            h.api::<ConfigMap>()
                .get("acme-config")
                .await
                .expect("cm")
                .resource_version(),
        ),
        (
            "headless".into(),
            h.api::<Service>()
                .get("acme-headless")
                .await
                .expect("svc")
                .resource_version(),
        ),
        (
            "service".into(),
            h.api::<Service>()
                .get("acme")
                .await
                .expect("svc")
                .resource_version(),
        ),
        (
            "statefulset".into(),
            h.api::<StatefulSet>()
                .get("acme")
                .await
                .expect("sts")
                .resource_version(),
        ),
        (
            "pdb".into(),
            h.api::<PodDisruptionBudget>()
                .get("acme")
                .await
                .expect("pdb")
                .resource_version(),
        ),
    ]
}

async fn pod_uids(h: &Harness) -> Vec<(String, Option<String>)> {
    let mut v: Vec<_> = h
        .api::<Pod>()
        .list(&ListParams::default().labels("app.kubernetes.io/instance=acme"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.uid()))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn unchanged_tenant_writes_nothing_and_a_restart_keeps_the_pods() {
    with_harness("idempotent", true, |h| {
        Box::pin(async move {
            let mut spec = full_spec();
            spec["scheduling"] = unschedulable();
            create_token_secret(h, "acme-tokens", "t1\n").await;
            h.create_tenant("acme", spec).await;
            // Steady state: the pods exist and cannot be scheduled, the status says so.
            h.wait_status("acme", "Degraded: pods cannot be scheduled", |t| {
                t.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Degraded"
                            && c.message.contains("pod acme-1 cannot be scheduled")
                    })
                })
            })
            .await;
            let pods = wait_for("two pods", || async {
                let p = pod_uids(h).await;
                (p.len() == 2).then_some(p)
            })
            .await;
            h.wait_reconciles(2).await;

            let before = versions(h).await;
            let events_before = h.events("acme").await.len();
            let applies_changed = |m: &Metrics| {
                ["created", "updated"]
                    .iter()
                    .map(|o| {
                        ["ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"]
                            .iter()
                            .map(|k| m.applies.with_label_values(&[k, o]).get())
                            .sum::<u64>()
                    })
                    .sum::<u64>()
            };
            let writes = (applies_changed(&h.metrics), h.metrics.status_writes.get());
            let unchanged_before = h
                .metrics
                .applies
                .with_label_values(&["StatefulSet", "unchanged"])
                .get();

            // Several reconciles of an unchanged tenant: nothing is written.
            h.wait_reconciles(4).await;
            assert_eq!(
                versions(h).await,
                before,
                "an unchanged tenant must not be written"
            );
            assert_eq!(
                (applies_changed(&h.metrics), h.metrics.status_writes.get()),
                writes
            );
            assert!(
                h.metrics
                    .applies
                    .with_label_values(&["StatefulSet", "unchanged"])
                    .get()
                    >= unchanged_before + 4
            );
            assert_eq!(
                h.events("acme").await.len(),
                events_before,
                "no Events without decisions"
            );

            // "Restart the operator": a new controller with empty caches reconciles everything.
            h.stop_controller().await;
            h.start_controller();
            h.wait_reconciles(4).await;
            assert_eq!(
                versions(h).await,
                before,
                "a restarted operator must not write either"
            );
            assert_eq!(h.metrics.status_writes.get(), 0);
            assert_eq!(
                pod_uids(h).await,
                pods,
                "a restarted operator must not restart pods"
            );
            let sts = h.api::<StatefulSet>().get("acme").await.expect("sts");
            assert_eq!(
                sts.status.and_then(|s| s.update_revision),
                h.api::<StatefulSet>()
                    .get("acme")
                    .await
                    .expect("sts")
                    .status
                    .and_then(|s| s.current_revision),
                "no rollout pending"
            );
            assert_eq!(h.events("acme").await.len(), events_before);
        })
    })
    .await;
}
