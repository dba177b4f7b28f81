//! Deletion applies the reclaim policy; a missing token Secret degrades, its rotation rolls.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use sluice_operator::builders::TOKENS_HASH_ANNOTATION;
use sluice_operator::crd::{IngestTenant, Phase};

use crate::harness::*;

#[tokio::test]
async fn deletion_keeps_or_deletes_volumes_as_the_reclaim_policy_says() {
    with_harness("reclaim", true, |h| {
        Box::pin(async move {
            for (name, policy) in [("keep", "Retain"), ("drop", "Delete")] {
                h.create_tenant(name, json!({
                    "replicas": 1, "storage": {"size": "1Gi", "reclaimPolicy": policy}, "scheduling": unschedulable()
                }))
                .await;
            }
            let pvcs = h.api::<PersistentVolumeClaim>();
            for claim in ["data-keep-0", "data-drop-0"] {
                wait_for(&format!("PVC {claim}"), || async { pvcs.get_opt(claim).await.ok().flatten() }).await;
            }
            let tenants = h.api::<IngestTenant>();
            for name in ["keep", "drop"] {
                tenants.delete(name, &DeleteParams::default()).await.expect("delete tenant");
            }
            for name in ["keep", "drop"] {
                wait_for(&format!("tenant {name} to be gone"), || async {
                    matches!(tenants.get_opt(name).await, Ok(None)).then_some(())
                })
                .await;
            }
            // Garbage collection removes the StatefulSets; the kept claim survives them.
            let stss = h.api::<StatefulSet>();
            for name in ["keep", "drop"] {
                wait_for(&format!("StatefulSet {name} to be collected"), || async {
                    matches!(stss.get_opt(name).await, Ok(None)).then_some(())
                })
                .await;
            }
            wait_for("PVC data-drop-0 to be deleted", || async {
                match pvcs.get_opt("data-drop-0").await {
                    Ok(None) => Some(()),
                    Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => Some(()),
                    _ => None,
                }
            })
            .await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let kept = pvcs.get("data-keep-0").await.expect("the Retain tenant's PVC is kept");
            assert!(kept.metadata.deletion_timestamp.is_none(), "kept PVC is not being deleted");
            assert!(kept.owner_references().is_empty(), "kept PVC has no owner to be collected with");
            let retained = h.wait_event("keep", "VolumesRetained").await;
            assert!(retained.note.unwrap_or_default().contains("data-keep-0"));
            let deleted = h.wait_event("drop", "VolumesDeleted").await;
            assert!(deleted.note.unwrap_or_default().contains("data-drop-0"));
        })
    })
    .await;
}

#[tokio::test]
async fn missing_token_secret_degrades_until_it_exists_then_rotation_rolls() {
    with_harness("secret", true, |h| {
        Box::pin(async move {
            h.create_tenant("acme", json!({
                "replicas": 1, "auth": {"tokenSecretRef": {"name": "later"}}, "scheduling": unschedulable()
            }))
            .await;
            let t = h
                .wait_status("acme", "Degraded: TokenSecretMissing", |t| {
                    t.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Degraded" && c.reason == "TokenSecretMissing"))
                })
                .await;
            let st = t.status.expect("status");
            assert_eq!(st.phase, Some(Phase::Degraded));
            let d = st.conditions.iter().find(|c| c.type_ == "Degraded").expect("Degraded");
            assert!(d.message.contains("Secret \"later\" not found"), "{}", d.message);
            let ev = h.wait_event("acme", "TokenSecretMissing").await;
            assert_eq!(ev.type_.as_deref(), Some("Warning"));

            // The Secret appears: the problem clears and its hash lands on the pod template.
            create_token_secret(h, "later", "one\n").await;
            let stss = h.api::<StatefulSet>();
            let hash_of = |s: &StatefulSet| {
                s.spec.as_ref()?.template.metadata.as_ref()?.annotations.as_ref()?.get(TOKENS_HASH_ANNOTATION).cloned()
            };
            let first = wait_for("the tokens hash on the pod template", || async { hash_of(&stss.get("acme").await.ok()?) }).await;
            h.wait_status("acme", "no TokenSecretMissing", |t| {
                t.status.as_ref().is_some_and(|s| !s.conditions.iter().any(|c| c.reason == "TokenSecretMissing"))
            })
            .await;

            // Rotating the tokens changes the hash, so the pods roll onto the new tokens.
            let patch = json!({"stringData": {"tokens": "two\n"}});
            h.api::<Secret>().patch("later", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("rotate");
            let second = wait_for("a new tokens hash", || async {
                let h2 = hash_of(&stss.get("acme").await.ok()?)?;
                (h2 != first).then_some(h2)
            })
            .await;
            assert_ne!(first, second);

            // Deleting the Secret by mistake degrades the tenant but does not roll the pods.
            let generation = stss.get("acme").await.expect("sts").metadata.generation;
            h.api::<Secret>().delete("later", &DeleteParams::default()).await.expect("delete secret");
            h.wait_status("acme", "TokenSecretMissing again", |t| {
                t.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.reason == "TokenSecretMissing"))
            })
            .await;
            h.wait_reconciles(2).await;
            let sts = stss.get("acme").await.expect("sts");
            assert_eq!(hash_of(&sts), Some(second), "the pod template keeps the last tokens hash");
            assert_eq!(sts.metadata.generation, generation, "no rollout for a missing Secret");
        })
    })
    .await;
}
