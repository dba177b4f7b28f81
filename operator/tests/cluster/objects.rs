//! What a tenant becomes: every object with the right spec, and a pool change rolling the pods.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use sluice_core::config::ServerConfig;
use sluice_operator::builders::{CONFIG_HASH_ANNOTATION, TOKENS_HASH_ANNOTATION};
use sluice_operator::crd::{self, IngestTenant, Phase};

use crate::harness::*;

#[tokio::test]
async fn tenant_gets_every_object_with_the_right_spec() {
    with_harness("objects", true, |h| {
        Box::pin(async move {
            create_token_secret(h, "acme-tokens", "secret-1\nsecret-2\n").await;
            let t = h.create_tenant("acme", full_spec()).await;
            let uid = t.uid().expect("uid");

            // ConfigMap: the rendered TOML is a ServerConfig the server accepts.
            let cms = h.api::<ConfigMap>();
            let cm = wait_for("ConfigMap acme-config", || async {
                cms.get_opt("acme-config").await.ok().flatten()
            })
            .await;
            let body = &cm.data.as_ref().expect("data")["sluice.toml"];
            let mut cfg: ServerConfig = toml::from_str(body).expect("rendered config parses");
            cfg.validate().expect("rendered config validates");
            assert_eq!(cfg.listen, "0.0.0.0:8086");
            assert_eq!(cfg.data_dir, "/var/lib/sluice");
            assert!(!cfg.auto_create_databases);
            assert_eq!(cfg.pool.connections, 4);
            assert_eq!(cfg.pool.flush_workers, 2);
            assert_eq!(cfg.pool.flush_interval, Duration::from_millis(500));
            assert_eq!(cfg.limits.max_series, 5000);
            assert_eq!(cfg.limits.max_body_bytes.0, 32 << 20);
            assert_eq!(
                cfg.auth.tokens_file.as_deref(),
                Some("/etc/sluice/auth/tokens")
            );
            assert_eq!(cfg.databases[0].name, "telegraf");
            assert_eq!(cfg.databases[0].retention_policies.len(), 2);
            let hash = cm.annotations()[CONFIG_HASH_ANNOTATION].clone();

            // Every object is owned by the tenant and written by our field manager.
            let owned = |m: &ObjectMeta, what: &str| {
                let o = m
                    .owner_references
                    .as_ref()
                    .unwrap_or_else(|| panic!("{what} has no owner"));
                assert_eq!(o[0].uid, uid, "{what} owner");
                assert_eq!(o[0].controller, Some(true), "{what} controller ref");
                let managers: Vec<_> = m
                    .managed_fields
                    .iter()
                    .flatten()
                    .filter_map(|f| f.manager.clone())
                    .collect();
                assert!(
                    managers.contains(&"sluice-operator".to_string()),
                    "{what} managers {managers:?}"
                );
            };
            owned(&cm.metadata, "ConfigMap");

            // The tenant's pods gather reads from each other: a peer list they read again when
            // it changes, and a token the operator made once.
            assert_eq!(
                cfg.cluster.peers_file.as_deref(),
                Some("/etc/sluice/peers/peers")
            );
            assert_eq!(
                cfg.cluster.token_file.as_deref(),
                Some("/etc/sluice/cluster/token")
            );
            let peers = wait_for("ConfigMap acme-peers", || async {
                cms.get_opt("acme-peers").await.ok().flatten()
            })
            .await;
            owned(&peers.metadata, "peers ConfigMap");
            let secrets = h.api::<Secret>();
            let cluster = wait_for("Secret acme-cluster", || async {
                secrets.get_opt("acme-cluster").await.ok().flatten()
            })
            .await;
            let token = cluster.data.as_ref().expect("data")["token"].0.clone();
            assert_eq!(token.len(), 64, "a 32-byte hex token");
            assert_eq!(cluster.owner_references()[0].uid, uid);

            let svcs = h.api::<Service>();
            let headless = wait_for("Service acme-headless", || async {
                svcs.get_opt("acme-headless").await.ok().flatten()
            })
            .await;
            owned(&headless.metadata, "headless Service");
            let hs = headless.spec.expect("spec");
            assert_eq!(hs.cluster_ip.as_deref(), Some("None"));
            assert_eq!(hs.ports.expect("ports")[0].port, 8086);
            let client_svc = wait_for("Service acme", || async {
                svcs.get_opt("acme").await.ok().flatten()
            })
            .await;
            owned(&client_svc.metadata, "client Service");
            let cs = client_svc.spec.expect("spec");
            assert!(cs.cluster_ip.is_some_and(|ip| ip != "None"));
            assert_eq!(
                cs.selector.expect("selector")["app.kubernetes.io/instance"],
                "acme"
            );

            let stss = h.api::<StatefulSet>();
            let sts = wait_for("StatefulSet acme", || async {
                stss.get_opt("acme").await.ok().flatten()
            })
            .await;
            owned(&sts.metadata, "StatefulSet");
            let spec = sts.spec.expect("spec");
            assert_eq!(spec.replicas, Some(2));
            assert_eq!(spec.service_name.as_deref(), Some("acme-headless"));
            let retention = spec
                .persistent_volume_claim_retention_policy
                .expect("retention policy");
            assert_eq!(retention.when_deleted.as_deref(), Some("Retain"));
            let claim = &spec.volume_claim_templates.expect("claims")[0];
            let requests = claim
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .expect("requests");
            assert_eq!(requests["storage"].0, "1Gi");
            let tmpl_meta = spec.template.metadata.expect("template metadata");
            let annotations = tmpl_meta.annotations.expect("annotations");
            assert_eq!(annotations[CONFIG_HASH_ANNOTATION], hash);
            assert!(annotations.contains_key(TOKENS_HASH_ANNOTATION));
            let pod = spec.template.spec.expect("pod spec");
            assert_eq!(pod.termination_grace_period_seconds, Some(90));
            assert_eq!(
                pod.security_context
                    .as_ref()
                    .and_then(|s| s.run_as_non_root),
                Some(true)
            );
            let c = &pod.containers[0];
            assert_eq!(c.image.as_deref(), Some("sluice-server:0.0.0-test"));
            assert_eq!(c.args.as_ref().expect("args")[3], "80s");
            assert_eq!(
                c.security_context
                    .as_ref()
                    .and_then(|s| s.read_only_root_filesystem),
                Some(true)
            );
            assert_eq!(
                c.readiness_probe
                    .as_ref()
                    .and_then(|p| p.http_get.as_ref())
                    .and_then(|g| g.path.as_deref()),
                Some("/ready")
            );
            assert_eq!(
                c.liveness_probe
                    .as_ref()
                    .and_then(|p| p.http_get.as_ref())
                    .and_then(|g| g.path.as_deref()),
                Some("/health")
            );
            assert_eq!(
                c.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .expect("requests")["cpu"]
                    .0,
                "100m"
            );
            let volumes: Vec<_> = pod
                .volumes
                .expect("volumes")
                .into_iter()
                .map(|v| v.name)
                .collect();
            assert_eq!(volumes, ["config", "tmp", "peers", "cluster", "tokens"]);
            assert!(pod.affinity.and_then(|a| a.pod_anti_affinity).is_some());

            let pdbs = h.api::<PodDisruptionBudget>();
            let pdb = wait_for("PodDisruptionBudget acme", || async {
                pdbs.get_opt("acme").await.ok().flatten()
            })
            .await;
            owned(&pdb.metadata, "PodDisruptionBudget");
            assert_eq!(
                pdb.spec.expect("spec").max_unavailable,
                Some(IntOrString::Int(1))
            );

            // The finalizer is on, the status describes this generation, Events say what happened.
            let t = h.tenant("acme").await;
            assert!(t.finalizers().contains(&crd::FINALIZER.to_string()));
            let t = h
                .wait_status("acme", "a status with conditions", |t| {
                    t.status.as_ref().is_some_and(|s| {
                        s.conditions.len() == 4 && s.config_hash.as_deref() == Some(hash.as_str())
                    })
                })
                .await;
            let st = t.status.expect("status");
            assert_eq!(
                st.selector.as_deref(),
                Some("app.kubernetes.io/instance=acme,app.kubernetes.io/name=sluice-server")
            );
            let types: Vec<_> = st.conditions.iter().map(|c| c.type_.as_str()).collect();
            assert_eq!(types, ["Ready", "Progressing", "Degraded", "Plateau"]);
            assert!(st
                .conditions
                .iter()
                .all(|c| !c.reason.is_empty() && !c.message.is_empty()));
            let created = h.wait_event("acme", "Created").await;
            let note = created.note.unwrap_or_default();
            assert!(
                note.contains("StatefulSet acme") && note.contains("ConfigMap acme-config"),
                "{note}"
            );
            assert_eq!(
                created.reporting_controller.as_deref(),
                Some("sluice-operator")
            );

            // Nothing can pull the test image: the status says so, truthfully. Before that, the
            // pod may be reported unschedulable for a moment (the scheduler can see it before
            // its volume claim exists), so wait for the image to be the reason.
            let t = h
                .wait_status("acme", "Degraded: PodsFailing on the image", |t| {
                    t.status.as_ref().is_some_and(|s| {
                        s.phase == Some(Phase::Degraded)
                            && s.conditions.iter().any(|c| {
                                c.type_ == "Degraded"
                                    && c.reason == "PodsFailing"
                                    && c.message.contains("cannot pull image")
                            })
                    })
                })
                .await;
            let st = t.status.expect("status");
            let degraded = st
                .conditions
                .iter()
                .find(|c| c.type_ == "Degraded")
                .expect("Degraded");
            assert!(
                degraded
                    .message
                    .contains("cannot pull image \"sluice-server:0.0.0-test\""),
                "{}",
                degraded.message
            );
            let ready = st
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .expect("Ready");
            assert_eq!(ready.status, "False");
            assert_eq!(ready.message, "0/2 replicas ready");
            let warning = h.wait_event("acme", "PodsFailing").await;
            assert_eq!(warning.type_.as_deref(), Some("Warning"));
        })
    })
    .await;
}

#[tokio::test]
async fn pool_change_rewrites_the_config_and_rolls_the_pods() {
    with_harness("pool", true, |h| {
        Box::pin(async move {
            let mut spec = full_spec();
            spec["auth"] = Value::Null;
            spec["scheduling"] = unschedulable();
            h.create_tenant("acme", spec).await;
            let cms = h.api::<ConfigMap>();
            let stss = h.api::<StatefulSet>();
            let cm = wait_for("ConfigMap", || async {
                cms.get_opt("acme-config").await.ok().flatten()
            })
            .await;
            let old_hash = cm.annotations()[CONFIG_HASH_ANNOTATION].clone();
            let sts = wait_for("StatefulSet", || async {
                stss.get_opt("acme").await.ok().flatten()
            })
            .await;
            let old_gen = sts.metadata.generation.expect("generation");

            let patch = json!({"spec": {"pool": {"flushWorkers": 6}}});
            h.api::<IngestTenant>()
                .patch("acme", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patch tenant");

            let cm = wait_for("the new config", || async {
                let cm = cms.get("acme-config").await.ok()?;
                cm.data.as_ref()?["sluice.toml"]
                    .contains("flush_workers = 6")
                    .then_some(cm)
            })
            .await;
            let new_hash = cm.annotations()[CONFIG_HASH_ANNOTATION].clone();
            assert_ne!(new_hash, old_hash);
            let cfg: ServerConfig =
                toml::from_str(&cm.data.expect("data")["sluice.toml"]).expect("parses");
            assert_eq!(cfg.pool.flush_workers, 6);
            assert_eq!(cfg.pool.connections, 4, "untouched fields stay");

            let sts = wait_for("the pod template to carry the new hash", || async {
                let s = stss.get("acme").await.ok()?;
                let a = s
                    .spec
                    .as_ref()?
                    .template
                    .metadata
                    .as_ref()?
                    .annotations
                    .as_ref()?;
                (a.get(CONFIG_HASH_ANNOTATION) == Some(&new_hash)).then_some(s)
            })
            .await;
            assert!(
                sts.metadata.generation.expect("generation") > old_gen,
                "a new pod template is a new generation"
            );
            let t = h
                .wait_status("acme", "the status to report the new hash", |t| {
                    t.status.as_ref().and_then(|s| s.config_hash.as_deref())
                        == Some(new_hash.as_str())
                })
                .await;
            assert_eq!(t.status.expect("status").observed_generation, Some(2));
            let ev = h.wait_event("acme", "ConfigChanged").await;
            let note = ev.note.unwrap_or_default();
            assert!(
                note.contains(&old_hash) && note.contains(&new_hash),
                "{note}"
            );
        })
    })
    .await;
}
