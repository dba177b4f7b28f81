//! The harness: a client for the test cluster, a namespace and an in-process controller per
//! test, and waits with a deadline.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{json, Value};
use sluice_operator::cancel::{cancel_pair, Trigger};
use sluice_operator::controller::{self, Context, Options};
use sluice_operator::crd::{self, IngestTenant};
use sluice_operator::metrics::Metrics;

pub(crate) const ENV: &str = "SLUICE_TEST_KUBECONFIG";
/// Generous: the machine may be busy compiling while the cluster schedules pods.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(120);

/// A client for the test cluster, or `None` (with a notice) when no cluster is configured.
pub(crate) async fn cluster(test: &str) -> Option<Client> {
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

pub(crate) fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let x = (t as u64) ^ (u64::from(std::process::id()) << 20) ^ N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:06x}", x & 0xff_ffff)
}

/// Polls `f` until it returns `Some`, or panics after `TIMEOUT` naming what was awaited.
pub(crate) async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> T
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
pub(crate) async fn install_crd(client: &Client) {
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

pub(crate) struct Harness {
    pub(crate) client: Client,
    pub(crate) ns: String,
    pub(crate) metrics: Metrics,
    stop: Option<(Trigger, tokio::task::JoinHandle<()>)>,
}

impl Harness {
    pub(crate) async fn new(client: Client, test: &str) -> Self {
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
    pub(crate) fn start_controller(&mut self) {
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
    pub(crate) async fn stop_controller(&mut self) {
        if let Some((trigger, handle)) = self.stop.take() {
            trigger.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(30), handle).await;
        }
    }

    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub(crate) async fn create_tenant(&self, name: &str, spec: Value) -> IngestTenant {
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

    pub(crate) async fn tenant(&self, name: &str) -> IngestTenant {
        self.api::<IngestTenant>()
            .get(name)
            .await
            .expect("get tenant")
    }

    /// Waits until the status describes the current generation and `f` accepts it.
    pub(crate) async fn wait_status(
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

    pub(crate) async fn events(&self, tenant: &str) -> Vec<K8sEvent> {
        self.api::<K8sEvent>()
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(tenant))
            .collect()
    }

    pub(crate) async fn wait_event(&self, tenant: &str, reason: &str) -> K8sEvent {
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
    pub(crate) async fn wait_reconciles(&self, n: u64) {
        let target = self.metrics.duration.get_sample_count() + n;
        wait_for(&format!("{n} reconciles"), || async {
            (self.metrics.duration.get_sample_count() >= target).then_some(())
        })
        .await;
    }

    /// Deletes the tenants while the controller still runs their finalizers, then the
    /// namespace. A finalizer left behind by a failed test is removed so nothing is stuck.
    pub(crate) async fn cleanup(mut self) {
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
pub(crate) async fn with_harness<F>(test: &str, controller: bool, body: F)
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
pub(crate) fn unschedulable() -> Value {
    json!({"nodeSelector": {"sluice.dev/test-no-such-node": "true"}})
}

pub(crate) fn full_spec() -> Value {
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

pub(crate) async fn create_token_secret(h: &Harness, name: &str, tokens: &str) {
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
