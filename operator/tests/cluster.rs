//! Integration tests against a real kube-apiserver (localkube: etcd, API server, controller
//! manager, scheduler, kubelet), never a mock.
//!
//! `SLUICE_TEST_KUBECONFIG` names the cluster's kubeconfig (`scripts/test` sets it after
//! `localkube up`). Unset, every test prints a notice and passes (plain `cargo test` on a dev
//! box); set but unreachable, every test fails.
//!
//! Each test runs in its own namespace with its own in-process controller watching only that
//! namespace, so tests run in parallel without seeing each other, and deletes what it created
//! (tenants first, while its controller still runs their finalizers, then the namespace).
//! Nothing needs the server image: pods may never start, and the tests assert on API objects,
//! status and Events.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{json, Value};
use sluice_core::config::ServerConfig;
use sluice_operator::builders::{CONFIG_HASH_ANNOTATION, TOKENS_HASH_ANNOTATION};
use sluice_operator::cancel::{cancel_pair, Trigger};
use sluice_operator::controller::{self, Context, Options};
use sluice_operator::crd::{self, IngestTenant, Phase};
use sluice_operator::leader::{LeaderElector, LeaseConfig};
use sluice_operator::metrics::Metrics;

const ENV: &str = "SLUICE_TEST_KUBECONFIG";
/// Generous: the machine may be busy compiling while the cluster schedules pods.
const TIMEOUT: Duration = Duration::from_secs(120);

/// A client for the test cluster, or `None` (with a notice) when no cluster is configured.
async fn cluster(test: &str) -> Option<Client> {
    let Some(path) = std::env::var_os(ENV) else {
        // Written to the real stderr, not through the test harness's capture, so that a plain
        // `cargo test` shows that these tests did not run.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: {ENV} is not set (scripts/test sets it after `localkube up`)"
        );
        return None;
    };
    let kubeconfig = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("{ENV}={path:?} is set but cannot be read: {e}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{ENV}={path:?}: bad kubeconfig: {e}"));
    let client = Client::try_from(config).unwrap_or_else(|e| panic!("cannot build a client: {e}"));
    client
        .apiserver_version()
        .await
        .unwrap_or_else(|e| panic!("{ENV}={path:?} is set but the API server is unreachable: {e}"));
    Some(client)
}

fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let x = (t as u64) ^ (u64::from(std::process::id()) << 20) ^ N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:06x}", x & 0xff_ffff)
}

/// Polls `f` until it returns `Some`, or panics after `TIMEOUT` naming what was awaited.
async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "timed out after {TIMEOUT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Installs the CRD exactly as the operator's types define it and waits until it is served.
async fn install_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(
        &name,
        &PatchParams::apply("sluice-operator-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("the API server refused the CRD");
    wait_for("the CRD to be established", || async {
        let c = crds.get(&name).await.ok()?;
        let established = c
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        established.then_some(())
    })
    .await;
}

struct Harness {
    client: Client,
    ns: String,
    metrics: Metrics,
    stop: Option<(Trigger, tokio::task::JoinHandle<()>)>,
}

impl Harness {
    async fn new(client: Client, test: &str) -> Self {
        install_crd(&client).await;
        let ns = unique(&format!("sluice-it-{test}"));
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let obj = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.clone()),
                labels: Some([("sluice.dev/test".to_string(), test.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &obj)
            .await
            .expect("create namespace");
        // The namespace's default ServiceAccount is created asynchronously; pods need it.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), &ns);
        wait_for("the default ServiceAccount", || async {
            sas.get_opt("default").await.ok().flatten()
        })
        .await;
        Self {
            client,
            ns,
            metrics: Metrics::new().expect("metrics"),
            stop: None,
        }
    }

    /// Starts an in-process controller (a fresh "operator process": new metrics, new caches).
    fn start_controller(&mut self) {
        assert!(self.stop.is_none(), "controller already running");
        self.metrics = Metrics::new().expect("metrics");
        let options = Options {
            namespace: Some(self.ns.clone()),
            requeue_ready: Duration::from_secs(2),
            requeue_not_ready: Duration::from_secs(1),
            instance: format!("test-{}", self.ns),
        };
        let ctx = Context::new(self.client.clone(), self.metrics.clone(), options);
        let (trigger, cancel) = cancel_pair();
        let handle = tokio::spawn(controller::run(
            ctx,
            async move { cancel.cancelled().await },
        ));
        self.stop = Some((trigger, handle));
    }

    /// Stops the controller gracefully (as SIGTERM would).
    async fn stop_controller(&mut self) {
        if let Some((trigger, handle)) = self.stop.take() {
            trigger.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(30), handle).await;
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn create_tenant(&self, name: &str, spec: Value) -> IngestTenant {
        let t: IngestTenant = serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "IngestTenant",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .expect("tenant JSON");
        self.api::<IngestTenant>()
            .create(&PostParams::default(), &t)
            .await
            .unwrap_or_else(|e| panic!("creating tenant {name}: {e}"))
    }

    async fn tenant(&self, name: &str) -> IngestTenant {
        self.api::<IngestTenant>()
            .get(name)
            .await
            .expect("get tenant")
    }

    /// Waits until the status describes the current generation and `f` accepts it.
    async fn wait_status(
        &self,
        name: &str,
        what: &str,
        f: impl Fn(&IngestTenant) -> bool,
    ) -> IngestTenant {
        let api = self.api::<IngestTenant>();
        wait_for(what, || async {
            let t = api.get(name).await.ok()?;
            let s = t.status.as_ref()?;
            (s.observed_generation == t.metadata.generation && f(&t)).then_some(t)
        })
        .await
    }

    async fn events(&self, tenant: &str) -> Vec<K8sEvent> {
        self.api::<K8sEvent>()
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(tenant))
            .collect()
    }

    async fn wait_event(&self, tenant: &str, reason: &str) -> K8sEvent {
        wait_for(&format!("Event {reason} for {tenant}"), || async {
            self.events(tenant)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
        })
        .await
    }

    /// Waits until this controller has run `n` more reconciles.
    /// Waits until `n` more reconciles have *finished* (the duration histogram observes a
    /// reconcile when it ends; the `reconciles` counter counts starts, so waiting on it races
    /// with the reconcile's own applies).
    async fn wait_reconciles(&self, n: u64) {
        let target = self.metrics.duration.get_sample_count() + n;
        wait_for(&format!("{n} reconciles"), || async {
            (self.metrics.duration.get_sample_count() >= target).then_some(())
        })
        .await;
    }

    /// Deletes the tenants while the controller still runs their finalizers, then the
    /// namespace. A finalizer left behind by a failed test is removed so nothing is stuck.
    async fn cleanup(mut self) {
        let tenants = self.api::<IngestTenant>();
        if self.stop.is_none() {
            self.start_controller();
        }
        let _ = tenants
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match tenants.list(&ListParams::default()).await {
                Ok(l) if l.items.is_empty() => break,
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
        if let Ok(l) = tenants.list(&ListParams::default()).await {
            for t in l.items {
                let patch = json!({"metadata": {"finalizers": null}});
                let _ = tenants
                    .patch(
                        &t.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
            }
        }
        self.stop_controller().await;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces
            .delete(&self.ns, &DeleteParams::background())
            .await;
    }
}

/// Runs `body` in a fresh harness and cleans up even when it panics.
async fn with_harness<F>(test: &str, controller: bool, body: F)
where
    F: for<'a> FnOnce(&'a mut Harness) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
{
    let Some(client) = cluster(test).await else {
        return;
    };
    let mut h = Harness::new(client, test).await;
    if controller {
        h.start_controller();
    }
    let result = AssertUnwindSafe(body(&mut h)).catch_unwind().await;
    h.cleanup().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// A nodeSelector no node has: pods stay Pending (Unschedulable), a stable state, and their
/// WaitForFirstConsumer volumes are never provisioned.
fn unschedulable() -> Value {
    json!({"nodeSelector": {"sluice.dev/test-no-such-node": "true"}})
}

fn full_spec() -> Value {
    json!({
        "image": "sluice-server:0.0.0-test",
        "replicas": 2,
        "databases": [{
            "name": "telegraf",
            "retentionPolicies": [
                {"name": "autogen", "duration": "30d", "default": true},
                {"name": "raw", "duration": "7d"}
            ]
        }],
        "autoCreateDatabases": false,
        "pool": {"connections": 4, "flushWorkers": 2, "flushInterval": "500ms"},
        "storage": {"size": "1Gi"},
        "limits": {"maxBodyBytes": "32Mi", "maxSeries": 5000},
        "auth": {"tokenSecretRef": {"name": "acme-tokens"}},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "terminationGracePeriodSeconds": 90
    })
}

async fn create_token_secret(h: &Harness, name: &str, tokens: &str) {
    let s = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("tokens".to_string(), ByteString(tokens.as_bytes().to_vec()))].into()),
        ..Default::default()
    };
    h.api::<Secret>()
        .create(&PostParams::default(), &s)
        .await
        .expect("create secret");
}

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

#[tokio::test]
async fn invalid_tenants_are_refused_by_the_api_server_with_their_message() {
    with_harness("invalid", false, |h| {
        Box::pin(async move {
            let api = h.api::<IngestTenant>();
            let cases: Vec<(&str, Value, &str)> = vec![
                ("bounds", json!({"replicas": 3, "scaling": {"minReplicas": 5, "maxReplicas": 2}}),
                 "scaling.minReplicas must be less than or equal to scaling.maxReplicas"),
                ("defaults", json!({"databases": [{"name": "db", "retentionPolicies": [
                    {"name": "a", "duration": "1d", "default": true}, {"name": "b", "duration": "2d", "default": true}]}]}),
                 "exactly one retention policy of a database must have default: true"),
                ("nodefault", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "a", "duration": "1d"}]}]}),
                 "exactly one retention policy of a database must have default: true"),
                ("duration", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "a", "duration": "30 days", "default": true}]}]}),
                 "must be 'inf' or a duration such as 30d"),
                ("dbname", json!({"databases": [{"name": "bad name"}]}),
                 "must start with a letter or '_' and contain only letters, digits"),
                ("rpname", json!({"databases": [{"name": "db", "retentionPolicies": [{"name": "9lives", "default": true}]}]}),
                 "must start with a letter or '_'"),
                ("dupdb", json!({"databases": [{"name": "db"}, {"name": "db"}]}), "Duplicate value"),
                ("interval", json!({"pool": {"flushInterval": "soon"}}), "must be a positive duration such as 250ms"),
                ("interval0", json!({"pool": {"flushInterval": "0s"}}), "must be a positive duration such as 250ms"),
                ("p95", json!({"autoscaling": {"p95Target": "0ms"}}), "must be a positive duration"),
                ("connections", json!({"pool": {"connections": 0}}), "should be greater than or equal to 1"),
                ("replicas", json!({"replicas": -1}), "should be greater than or equal to 0"),
                ("size", json!({"limits": {"maxBodyBytes": "lots"}}), "must be a byte count or a number with a unit"),
                ("storage", json!({"storage": {"size": "ten gigs"}}), "must be a positive Kubernetes quantity"),
                ("reclaim", json!({"storage": {"reclaimPolicy": "Recycle"}}), "Unsupported value: \"Recycle\""),
                ("autoscale", json!({"autoscaling": {"enabled": true}}),
                 "autoscaling.enabled needs scaling.minReplicas and scaling.maxReplicas"),
                ("grace", json!({"terminationGracePeriodSeconds": 1}), "should be greater than or equal to 15"),
            ];
            // Sent as raw JSON (as kubectl would), not through the Rust types, which could not
            // even represent some of these.
            let ar = kube::core::ApiResource::erase::<IngestTenant>(&());
            let raw: Api<kube::core::DynamicObject> = Api::namespaced_with(h.client.clone(), &h.ns, &ar);
            let mut failures = Vec::new();
            for (name, spec, want) in &cases {
                let obj = kube::core::DynamicObject::new(&format!("bad-{name}"), &ar).data(json!({ "spec": spec }));
                match raw.create(&PostParams::default(), &obj).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains(want) => {}
                    Err(e) => failures.push(format!("{name}: wanted 422 with {want:?}, got {e}")),
                    Ok(_) => failures.push(format!("{name}: accepted, wanted {want:?}")),
                }
            }
            // Names that would overflow the StatefulSet's labels or are not DNS-1035 labels.
            for (name, what) in [("a".repeat(53), "long"), ("acme.example".to_string(), "dotted")] {
                let t = IngestTenant::new(&name, serde_json::from_value(json!({})).expect("spec"));
                match api.create(&PostParams::default(), &t).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("must be a DNS-1035 label") => {}
                    other => failures.push(format!("{what} name: wanted the DNS-1035 message, got {other:?}")),
                }
            }
            assert!(failures.is_empty(), "{}", failures.join("\n"));

            // Immutable storage: accepted once, then every change refused.
            let t: IngestTenant = serde_json::from_value(json!({
                "apiVersion": "sluice.dev/v1alpha1", "kind": "IngestTenant",
                "metadata": {"name": "fixed"}, "spec": {"storage": {"storageClassName": "standard", "size": "1Gi"}},
            }))
            .expect("tenant JSON");
            api.create(&PostParams::default(), &t).await.expect("a valid tenant is accepted");
            for (patch, want) in [
                (json!({"spec": {"storage": {"storageClassName": "fast"}}}), "storage.storageClassName is immutable"),
                (json!({"spec": {"storage": {"storageClassName": null}}}), "storage.storageClassName is immutable"),
                (json!({"spec": {"storage": {"size": "2Gi"}}}), "storage.size is immutable"),
            ] {
                match api.patch("fixed", &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains(want) => {}
                    other => panic!("{patch}: wanted {want:?}, got {other:?}"),
                }
            }
            // The reclaim policy may change (the StatefulSet's retention policy is mutable).
            api.patch("fixed", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"storage": {"reclaimPolicy": "Delete"}}})))
                .await
                .expect("reclaimPolicy is mutable");
            // Defaults are filled in by the API server.
            let stored = api.get("fixed").await.expect("get");
            assert_eq!(stored.spec.pool.flush_interval, "1s");
            assert_eq!(stored.spec.replicas, 1);
            assert_eq!(stored.spec.image, crd::DEFAULT_IMAGE);
        })
    })
    .await;
}

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

#[tokio::test]
async fn only_one_replica_holds_the_lease_and_release_hands_over() {
    with_harness("lease", false, |h| {
        Box::pin(async move {
            let cfg = |id: &str| LeaseConfig {
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
                ..LeaseConfig::new("sluice-operator", h.ns.clone(), id)
            };
            let a = LeaderElector::new(h.client.clone(), cfg("a"));
            let b = LeaderElector::new(h.client.clone(), cfg("b"));
            assert!(
                a.try_acquire_or_renew().await.expect("a"),
                "a creates the Lease"
            );
            assert!(
                !b.try_acquire_or_renew().await.expect("b"),
                "b must not lead while a renews"
            );
            assert!(a.try_acquire_or_renew().await.expect("a renews"));
            assert!(!b.try_acquire_or_renew().await.expect("b"));
            let leases = h.api::<Lease>();
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref()),
                Some("a")
            );

            // A stops renewing (crashed): B takes over only after a full lease duration.
            let start = Instant::now();
            let (_t, never) = cancel_pair();
            assert!(b.acquire(&never).await);
            assert!(
                start.elapsed() >= Duration::from_secs(3),
                "took over after {:?}",
                start.elapsed()
            );
            assert!(
                !a.try_acquire_or_renew().await.expect("a"),
                "the old leader must not come back"
            );
            let lease = leases.get("sluice-operator").await.expect("lease");
            let spec = lease.spec.expect("spec");
            assert_eq!(spec.holder_identity.as_deref(), Some("b"));
            assert_eq!(spec.lease_transitions, Some(1));

            // B shuts down gracefully: A takes over at once.
            b.release().await.expect("release");
            assert!(
                a.try_acquire_or_renew().await.expect("a"),
                "a released Lease is free at once"
            );
        })
    })
    .await;
}

/// The binary itself, out of cluster with a kubeconfig: /health, /metrics, the Lease, a
/// reconcile, and a graceful SIGTERM that releases the Lease.
#[tokio::test]
async fn operator_binary_leads_reconciles_and_shuts_down_gracefully() {
    with_harness("binary", false, |h| {
        Box::pin(async move {
            let Some(kubeconfig) = std::env::var_os(ENV) else {
                return;
            };
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
                l.local_addr().expect("addr").port()
            };
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-operator"))
                .env("KUBECONFIG", &kubeconfig)
                .env("SLUICE_LOG", "warn")
                .args([
                    "--namespace",
                    &h.ns,
                    "--lease-namespace",
                    &h.ns,
                    "--identity",
                    "binary-test",
                ])
                .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .expect("start sluice-operator");
            let get = |path: &'static str| async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()?;
                s.write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .ok()?;
                let mut out = String::new();
                s.read_to_string(&mut out).await.ok()?;
                Some(out)
            };
            let health = wait_for("/health", || get("/health")).await;
            assert!(health.starts_with("HTTP/1.1 200"), "{health}");
            wait_for("the binary to lead", || async {
                get("/metrics")
                    .await
                    .filter(|m| m.contains("sluice_operator_leader 1"))
            })
            .await;
            let leases = h.api::<Lease>();
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease.spec.and_then(|s| s.holder_identity).as_deref(),
                Some("binary-test")
            );

            h.create_tenant("acme", json!({"replicas": 0})).await;
            h.wait_status("acme", "Stopped", |t| {
                t.status
                    .as_ref()
                    .is_some_and(|s| s.phase == Some(Phase::Stopped))
            })
            .await;
            let metrics = get("/metrics").await.expect("metrics");
            assert!(
                metrics.contains("sluice_operator_reconcile_duration_seconds_count"),
                "{metrics}"
            );
            assert!(
                metrics.contains(
                    "sluice_operator_applies_total{kind=\"StatefulSet\",outcome=\"created\"} 1"
                ),
                "{metrics}"
            );

            let status = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill");
            assert!(status.success());
            let start = Instant::now();
            let code = loop {
                if let Some(code) = child.try_wait().expect("wait") {
                    break code;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "operator did not stop on SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert!(code.success(), "graceful shutdown exits 0, got {code}");
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease.spec.and_then(|s| s.holder_identity),
                None,
                "the Lease is released on shutdown"
            );
            // Its tenant still needs its finalizer run: the harness's controller does that.
        })
    })
    .await;
}

/// A pod that falls behind: each scrape adds 100,000 offered points of which 80,000 are
/// acknowledged, and its write requests take 200-400 ms (p95 far over a 100 ms target).
struct FallingBehind {
    scrapes: AtomicU64,
}

impl sluice_operator::autoscale::run::Scrape for FallingBehind {
    fn scrape<'a>(
        &'a self,
        _pod: &'a Pod,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        let n = self.scrapes.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            let requests = 10 * n;
            Ok(format!(
                "sluice_points_offered_total {}\nsluice_points_acknowledged_total {}\nsluice_wal_backlog_bytes {}\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.1024\"}} 0\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.2048\"}} 0\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.4096\"}} {requests}\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"+Inf\"}} {requests}\n",
                100_000 * n,
                80_000 * n,
                1_000_000 * n
            ))
        })
    }
}

#[tokio::test]
async fn autoscaler_adds_a_pod_when_the_pods_fall_behind() {
    with_harness("autoscale", true, |h| {
        Box::pin(async move {
            h.create_tenant(
                "acme",
                json!({
                    "replicas": 1,
                    "scaling": {"minReplicas": 1, "maxReplicas": 3},
                    "autoscaling": {"enabled": true, "p95Target": "100ms"},
                    "scheduling": unschedulable()
                }),
            )
            .await;
            // No kubelet runs an unschedulable pod: make acme-0 look Ready, as a running pod is.
            let pods = h.api::<Pod>();
            wait_for("pod acme-0", || async {
                pods.get_opt("acme-0").await.ok().flatten()
            })
            .await;
            pods.patch_status(
                "acme-0",
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {
                    "phase": "Running", "podIP": "10.0.0.1",
                    "conditions": [{"type": "Ready", "status": "True"}]
                }})),
            )
            .await
            .expect("pod status");
            let options = Options {
                namespace: Some(h.ns.clone()),
                instance: format!("test-{}", h.ns),
                ..Options::default()
            };
            let ctx = Context::new(h.client.clone(), Metrics::new().expect("metrics"), options);
            let scraper = Arc::new(FallingBehind {
                scrapes: AtomicU64::new(0),
            });
            let (stop, cancel) = cancel_pair();
            let task = tokio::spawn(sluice_operator::autoscale::run::run(
                ctx,
                scraper,
                Duration::from_millis(300),
                async move { cancel.cancelled().await },
            ));
            let api = h.api::<IngestTenant>();
            let t = wait_for("spec.replicas 2 from the autoscaler", || async {
                let t = api.get("acme").await.ok()?;
                (t.spec.replicas == 2).then_some(t)
            })
            .await;
            stop.cancel();
            let _ = task.await;
            let st = t.status.expect("status");
            let last = st.last_scaling.expect("lastScaling");
            assert_eq!((last.from, last.to), (1, 2));
            // Falling behind at rate R caps the knee at 0.9 R, so the forecast wants
            // ceil(R / (0.9 R x 0.7)) = 2 pods.
            assert_eq!(last.reason, "Forecast");
            assert_eq!(st.p95.as_deref(), Some("410ms"));
            let knee = st.knee.expect("knee").points_per_second;
            let rate = st.rate.expect("rate");
            assert!(knee > 0.0 && knee < rate, "knee {knee}, rate {rate}");
            let ev = h.wait_event("acme", "Autoscaled").await;
            let note = ev.note.unwrap_or_default();
            assert!(note.contains("from 1 to 2 replicas: Forecast"), "{note}");
            assert!(note.contains("p95 410 ms"), "{note}");
            // The reconciler follows: the StatefulSet gets the new count.
            let stss = h.api::<StatefulSet>();
            wait_for("StatefulSet replicas 2", || async {
                let s = stss.get("acme").await.ok()?;
                (s.spec?.replicas == Some(2)).then_some(())
            })
            .await;
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
