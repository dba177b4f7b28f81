//! The reconciler: validate -> decommission -> build -> apply -> calibration -> status, wrapped
//! in a finalizer that applies the storage reclaim policy on deletion.
//!
//! Writes happen only when something changed: objects go through server-side apply (a no-op
//! when identical, so their resourceVersions stay put), the status is written only when it
//! differs, and Events are published only for decisions (something created, changed, scaled,
//! refused) — never "reconciled, nothing to do". That is why restarting the operator never
//! restarts a tenant's pods.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, ObjectReference, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{finalizer, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::{debug, info, warn};

use crate::builders::{self, Observed, TenantObjects, CONFIG_HASH_ANNOTATION, MANAGED_BY_LABEL};
use crate::crd::{
    IngestTenant, IngestTenantStatus, Phase, ReclaimPolicy, FIELD_MANAGER, FINALIZER,
};
use crate::metrics::Metrics;
use crate::status::{self, Observation, Problem};
use crate::validate::{validate, SpecError, ValidTenant};

/// Why a reconcile failed. The variant names are the `error` label of
/// `sluice_operator_reconcile_errors_total`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid spec: {0}")]
    InvalidSpec(#[from] SpecError),
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("the tenant has no namespace")]
    NoNamespace,
    #[error("reading random bytes for the tenant's cluster token: {0}")]
    Random(#[source] std::io::Error),
    #[error("{0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

fn kube_label(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) => match s.code {
            409 => "Conflict",
            404 => "NotFound",
            403 => "Forbidden",
            422 => "Invalid",
            429 => "TooManyRequests",
            500..=599 => "ServerError",
            _ => "ApiError",
        },
        _ => "Transport",
    }
}

impl Error {
    /// A bounded label for metrics: the error kind, with API errors split by status.
    pub fn metric_label(&self) -> &'static str {
        use kube::runtime::finalizer::Error as F;
        match self {
            Error::InvalidSpec(_) => "InvalidSpec",
            Error::Apply { source, .. } => match kube_label(source) {
                "Invalid" => "ApplyInvalid",
                "Conflict" => "Conflict",
                _ => "ApplyFailed",
            },
            Error::Kube(e) => kube_label(e),
            Error::NoNamespace => "NoNamespace",
            Error::Random(_) => "Random",
            Error::Finalizer(f) => match f.as_ref() {
                F::ApplyFailed(e) | F::CleanupFailed(e) => e.metric_label(),
                F::AddFinalizer(_) => "AddFinalizer",
                F::RemoveFinalizer(_) => "RemoveFinalizer",
                F::UnnamedObject => "UnnamedObject",
                F::InvalidFinalizer => "InvalidFinalizer",
            },
        }
    }

    /// Conflicts are someone else's concurrent write: retry almost at once. An invalid spec
    /// waits for the user (the watch brings the fix). Anything else backs off.
    pub fn requeue_after(&self) -> Duration {
        match self.metric_label() {
            "Conflict" => Duration::from_secs(1),
            "InvalidSpec" => Duration::from_secs(300),
            _ => Duration::from_secs(15),
        }
    }
}

/// Settings of one controller instance.
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch one namespace (tests, namespaced installs) or all of them.
    pub namespace: Option<String>,
    /// Re-check a healthy tenant this often (catches token rotation and drift).
    pub requeue_ready: Duration,
    /// Re-check a tenant that is not ready yet this often (pod states do not trigger the
    /// controller; they are polled).
    pub requeue_not_ready: Duration,
    /// Name of this operator instance in Events (`reportingInstance`).
    pub instance: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: None,
            requeue_ready: Duration::from_secs(300),
            requeue_not_ready: Duration::from_secs(30),
            instance: "sluice-operator".into(),
        }
    }
}

/// Shared by every reconcile of one controller.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub options: Options,
}

impl Context {
    pub fn new(client: Client, metrics: Metrics, options: Options) -> Arc<Self> {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(options.instance.clone()),
        };
        Arc::new(Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            options,
        })
    }

    pub(crate) async fn event(
        &self,
        tenant: &IngestTenant,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(note, 1000)),
            action: action.into(),
            secondary: None,
        };
        let reference: ObjectReference = tenant.object_ref(&());
        // An Event that cannot be written must not fail the reconcile: it is a report, not state.
        if let Err(e) = self.recorder.publish(&ev, &reference).await {
            warn!(error = %e, reason, "cannot publish event");
        }
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Runs the controller until `shutdown` resolves, then finishes in-flight reconciles.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let ns = ctx.options.namespace.clone();
    fn api<K>(client: &Client, ns: &Option<String>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    // Owned objects are watched only when they carry our label: the operator's cache must not
    // hold every ConfigMap and Service of the cluster.
    let owned = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={FIELD_MANAGER}"));
    let calibration_pods = watcher::Config::default().labels(&format!(
        "{MANAGED_BY_LABEL}={FIELD_MANAGER},{}={}",
        builders::COMPONENT_LABEL,
        crate::calibration::pod::COMPONENT
    ));
    let controller = Controller::new(
        api::<IngestTenant>(&client, &ns),
        watcher::Config::default(),
    );
    // A change to a token Secret must roll the pods promptly (the server reads its tokens at
    // start-up). Only Secrets' metadata is watched: the operator never caches their contents.
    let tenants = controller.store();
    let secrets =
        watcher::metadata_watcher(api::<Secret>(&client, &ns), watcher::Config::default())
            .touched_objects();
    controller
        .watches_stream(secrets, move |secret: PartialObjectMeta<Secret>| {
            let (sns, sname) = (secret.metadata.namespace, secret.metadata.name);
            tenants
                .state()
                .into_iter()
                .filter(|t| {
                    t.metadata.namespace == sns
                        && t.spec.auth.as_ref().map(|a| &a.token_secret_ref.name) == sname.as_ref()
                })
                .map(|t| ObjectRef::from_obj(&*t))
                .collect::<Vec<_>>()
        })
        .owns(api::<StatefulSet>(&client, &ns), owned.clone())
        .owns(api::<ConfigMap>(&client, &ns), owned.clone())
        .owns(api::<Service>(&client, &ns), owned.clone())
        .owns(api::<PodDisruptionBudget>(&client, &ns), owned)
        // A calibration pod that finishes wakes its tenant's reconcile.
        .owns(api::<Pod>(&client, &ns), calibration_pods)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(tenant = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
}

/// One reconcile of one tenant: the finalizer decides between apply and cleanup.
pub async fn reconcile(tenant: Arc<IngestTenant>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile_timer();
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<IngestTenant> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, tenant, |event| async {
        match event {
            FinalizerEvent::Apply(t) => apply(&t, &ctx).await,
            FinalizerEvent::Cleanup(t) => cleanup(&t, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// Counts the failure and decides when to retry.
pub fn error_policy(tenant: Arc<IngestTenant>, error: &Error, ctx: Arc<Context>) -> Action {
    let label = error.metric_label();
    ctx.metrics.failures.with_label_values(&[label]).inc();
    if label == "InvalidSpec" {
        info!(tenant = %builders::tenant_key(&tenant), error = %error, "tenant spec is invalid");
    } else {
        warn!(tenant = %builders::tenant_key(&tenant), error = %error, kind = label, "reconcile failed");
    }
    Action::requeue(error.requeue_after())
}

/// What a server-side apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "unchanged",
        }
    }
}

/// Server-side applies `obj` and tells whether anything was written, by comparing the
/// resourceVersion before and after (an identical apply does not change it).
async fn apply_object<K>(
    api: &Api<K>,
    obj: &K,
    kind: &'static str,
    metrics: &Metrics,
) -> Result<(Option<K>, K, Outcome), Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let wrap = |source| Error::Apply {
        kind,
        name: name.clone(),
        source,
    };
    let before = api.get_opt(&name).await.map_err(wrap)?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let after = api
        .patch(&name, &params, &Patch::Apply(obj))
        .await
        .map_err(wrap)?;
    let outcome = match &before {
        None => Outcome::Created,
        Some(b) if b.meta().resource_version == after.meta().resource_version => Outcome::Unchanged,
        Some(_) => Outcome::Updated,
    };
    metrics
        .applies
        .with_label_values(&[kind, outcome.as_str()])
        .inc();
    Ok((before, after, outcome))
}

/// Reads the token Secret: its hash rolls the pods on rotation; its absence is a problem the
/// status reports (the pods would wait for the volume forever, silently). While it is missing
/// the pod template keeps the hash it had, so that deleting a Secret by mistake does not roll
/// every pod into a state where none can start.
async fn observe_tokens(
    v: &ValidTenant,
    client: &Client,
) -> Result<(Observed, Option<Problem>), Error> {
    let Some(auth) = &v.spec.auth else {
        return Ok((Observed::default(), None));
    };
    let r = &auth.token_secret_ref;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &v.namespace);
    let problem = match secrets.get_opt(&r.name).await? {
        Some(s) => match s.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(bytes) => {
                let observed = Observed {
                    tokens_hash: Some(builders::tokens_hash(&bytes.0)),
                };
                return Ok((observed, None));
            }
            None => format!(
                "Secret {:?} has no key {:?} (spec.auth.tokenSecretRef)",
                r.name, r.key
            ),
        },
        None => format!("Secret {:?} not found (spec.auth.tokenSecretRef)", r.name),
    };
    let stss: Api<StatefulSet> = Api::namespaced(client.clone(), &v.namespace);
    let previous = stss.get_opt(&v.name).await?.and_then(|s| {
        s.spec?
            .template
            .metadata?
            .annotations?
            .remove(builders::TOKENS_HASH_ANNOTATION)
    });
    Ok((
        Observed {
            tokens_hash: previous,
        },
        Some(Problem::TokenSecretMissing(problem)),
    ))
}

/// Stage 4: writes the status if it changed and publishes Events for phase changes.
async fn update_status(
    tenant: &IngestTenant,
    ctx: &Context,
    obs: &Observation<'_>,
) -> Result<IngestTenantStatus, Error> {
    let prev = tenant.status.as_ref();
    let next = status::compute(prev, obs, Time(Utc::now()));
    if prev == Some(&next) {
        return Ok(next);
    }
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<IngestTenant> = Api::namespaced(ctx.client.clone(), &ns);
    // The autoscaler's fields are its own (it writes them under its field manager): applying
    // them from this reconcile's read could put back an older knee or last scaling.
    let applied = IngestTenantStatus {
        knee: None,
        traffic: None,
        plateau: None,
        rate: None,
        p95: None,
        last_scaling: None,
        ..next.clone()
    };
    let patch = serde_json::json!({
        "apiVersion": format!("{}/v1alpha1", crate::crd::GROUP),
        "kind": "IngestTenant",
        "status": applied,
    });
    api.patch_status(
        &tenant.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    ctx.metrics.status_writes.inc();

    let prev_phase = prev.and_then(|p| p.phase);
    let degraded_msg = |s: Option<&IngestTenantStatus>| {
        s.and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == status::DEGRADED && c.status == "True")
        })
        .map(|c| (c.reason.clone(), c.message.clone()))
    };
    let (before, after) = (degraded_msg(prev), degraded_msg(Some(&next)));
    if after.is_some() && after != before {
        let (reason, message) = after.unwrap_or_default();
        ctx.event(tenant, EventType::Warning, &reason, "Degrade", message)
            .await;
    }
    if next.phase != prev_phase {
        match next.phase {
            Some(Phase::Running) => {
                let note = format!("all {} replicas are ready", next.ready_replicas);
                ctx.event(tenant, EventType::Normal, "Running", "Observe", note)
                    .await;
            }
            Some(Phase::Stopped) => {
                ctx.event(
                    tenant,
                    EventType::Normal,
                    "Stopped",
                    "Observe",
                    "scaled to zero replicas".into(),
                )
                .await;
            }
            _ => {}
        }
        if prev_phase == Some(Phase::Degraded) && next.phase != Some(Phase::Degraded) {
            ctx.event(
                tenant,
                EventType::Normal,
                "Recovered",
                "Observe",
                "no longer degraded".into(),
            )
            .await;
        }
    }
    Ok(next)
}

/// How often a scale-down under way is looked at.
const DECOMMISSION_POLL: Duration = Duration::from_secs(5);

/// The Apply branch: validate, decommission, build, apply, report.
async fn apply(tenant: &IngestTenant, ctx: &Context) -> Result<Action, Error> {
    let key = builders::tenant_key(tenant);
    let spec_changed =
        tenant.status.as_ref().and_then(|s| s.observed_generation) != tenant.metadata.generation;

    // Stage 1: validate.
    let valid = match validate(tenant) {
        Ok(v) => v,
        Err(e) => {
            // Whatever runs keeps running (nothing is applied); report it truthfully.
            let sts = existing_stateful_set(tenant, ctx).await?;
            let obs = Observation {
                generation: tenant.metadata.generation,
                desired_replicas: None,
                selector: Some(builders::selector_string(&tenant.name_any())),
                stateful_set: sts.as_ref(),
                problems: vec![Problem::InvalidSpec(e.to_string())],
                ..Default::default()
            };
            update_status(tenant, ctx, &obs).await?;
            return Err(Error::InvalidSpec(e));
        }
    };
    if let (Some(from), true) = (valid.clamped_from, spec_changed) {
        let note = format!(
            "spec.replicas {from} is outside spec.scaling; running {} replicas",
            valid.replicas
        );
        ctx.event(tenant, EventType::Warning, "ReplicasClamped", "Scale", note)
            .await;
    }

    // Stage 2: a scale-down keeps the leaving pod until it has handed its data over.
    let leave = crate::decommission::stage(tenant, ctx, &valid).await?;
    let running = ValidTenant {
        replicas: leave.replicas,
        ..valid.clone()
    };

    // Stage 3: build (pure), after reading the one input that lives outside the spec.
    let (observed, token_problem) = observe_tokens(&valid, &ctx.client).await?;
    let objects = builders::build(&running, &observed);

    // Stage 4: apply.
    let mut problems: Vec<Problem> = token_problem.into_iter().collect();
    if let Some(why) = &leave.refused {
        problems.push(Problem::DecommissionRefused(format!(
            "scale-down waits: the receiving pod refuses the leaving pod's data: {why}"
        )));
    }
    let applied = apply_all(tenant, ctx, &running, &objects).await;
    let sts = match applied {
        Ok(sts) => Some(sts),
        Err(e) => {
            problems.push(Problem::ApplyFailed(e.to_string()));
            let sts = existing_stateful_set(tenant, ctx).await?;
            let obs = Observation {
                generation: tenant.metadata.generation,
                desired_replicas: Some(valid.replicas),
                selector: Some(builders::selector_string(&valid.name)),
                config_hash: None,
                stateful_set: sts.as_ref(),
                problems,
                decommission: leave.status.clone(),
                calibration: None,
            };
            update_status(tenant, ctx, &obs).await?;
            return Err(e);
        }
    };

    // Stage 5: one pod's knee, measured by a calibration pod when the capacity changed.
    let calibration = crate::calibration::stage(tenant, ctx, &valid).await?;

    // Stage 6: observe the pods and report.
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&builders::selector_string(&valid.name)))
        .await?;
    if let Some(p) = status::pod_problems(&listed.items) {
        problems.push(p);
    }
    let obs = Observation {
        generation: tenant.metadata.generation,
        desired_replicas: Some(valid.replicas),
        selector: Some(builders::selector_string(&valid.name)),
        config_hash: Some(valid.config_hash.clone()),
        stateful_set: sts.as_ref(),
        problems,
        decommission: leave.status.clone(),
        calibration: calibration.status,
    };
    let st = update_status(tenant, ctx, &obs).await?;
    debug!(tenant = %key, phase = ?st.phase, "reconciled");
    if leave.busy {
        return Ok(Action::requeue(DECOMMISSION_POLL));
    }
    if calibration.busy {
        return Ok(Action::requeue(crate::calibration::POLL));
    }
    Ok(match st.phase {
        Some(Phase::Running) | Some(Phase::Stopped) => Action::requeue(ctx.options.requeue_ready),
        _ => Action::requeue(ctx.options.requeue_not_ready),
    })
}

pub(crate) async fn existing_stateful_set(
    tenant: &IngestTenant,
    ctx: &Context,
) -> Result<Option<StatefulSet>, Error> {
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    Ok(api.get_opt(&tenant.name_any()).await?)
}

/// Applies every object, publishing an Event for each decision. Returns the StatefulSet as the
/// API server has it (with status) for the status stage.
async fn apply_all(
    tenant: &IngestTenant,
    ctx: &Context,
    v: &ValidTenant,
    o: &TenantObjects,
) -> Result<StatefulSet, Error> {
    let c = &ctx.client;
    let ns = &v.namespace;
    let m = &ctx.metrics;
    let mut created: Vec<String> = Vec::new();
    let mut updated: Vec<String> = Vec::new();
    let mut note = |outcome: Outcome, what: String| match outcome {
        Outcome::Created => created.push(what),
        Outcome::Updated => updated.push(what),
        Outcome::Unchanged => {}
    };

    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), ns);
    let (cm_before, _, outcome) = apply_object(&cms, &o.config_map, "ConfigMap", m).await?;
    if outcome == Outcome::Updated {
        let old = cm_before
            .as_ref()
            .and_then(|cm| {
                cm.metadata
                    .annotations
                    .as_ref()?
                    .get(CONFIG_HASH_ANNOTATION)
                    .cloned()
            })
            .unwrap_or_else(|| "none".into());
        if old != v.config_hash {
            let msg = format!(
                "server configuration changed (hash {old} -> {}); pods roll onto it one at a time",
                v.config_hash
            );
            ctx.event(tenant, EventType::Normal, "ConfigChanged", "Update", msg)
                .await;
        }
    }
    note(
        outcome,
        format!("ConfigMap {}", builders::config_map_name(&v.name)),
    );

    let (_, _, outcome) = apply_object(&cms, &o.peers_config_map, "ConfigMap", m).await?;
    note(
        outcome,
        format!("ConfigMap {}", builders::peers_config_map_name(&v.name)),
    );
    if ensure_cluster_secret(v, c).await? {
        note(
            Outcome::Created,
            format!("Secret {}", builders::cluster_secret_name(&v.name)),
        );
    }

    let svcs: Api<Service> = Api::namespaced(c.clone(), ns);
    let (_, _, outcome) = apply_object(&svcs, &o.headless_service, "Service", m).await?;
    note(
        outcome,
        format!("Service {}", builders::headless_service_name(&v.name)),
    );
    let (_, _, outcome) = apply_object(&svcs, &o.client_service, "Service", m).await?;
    note(outcome, format!("Service {}", v.name));

    let stss: Api<StatefulSet> = Api::namespaced(c.clone(), ns);
    let (sts_before, sts, outcome) = apply_object(&stss, &o.stateful_set, "StatefulSet", m).await?;
    if outcome == Outcome::Updated {
        let old = sts_before.as_ref().and_then(|s| s.spec.as_ref()?.replicas);
        if old != Some(v.replicas) {
            let msg = format!(
                "scaled StatefulSet {} from {} to {} replicas",
                v.name,
                old.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
                v.replicas
            );
            ctx.event(tenant, EventType::Normal, "Scaled", "Scale", msg)
                .await;
        }
    }
    note(outcome, format!("StatefulSet {}", v.name));

    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), ns);
    let (_, _, outcome) =
        apply_object(&pdbs, &o.pod_disruption_budget, "PodDisruptionBudget", m).await?;
    note(outcome, format!("PodDisruptionBudget {}", v.name));

    if !created.is_empty() {
        ctx.event(
            tenant,
            EventType::Normal,
            "Created",
            "Create",
            format!("created {}", created.join(", ")),
        )
        .await;
    }
    if !updated.is_empty() {
        ctx.event(
            tenant,
            EventType::Normal,
            "Updated",
            "Update",
            format!("updated {}", updated.join(", ")),
        )
        .await;
    }
    Ok(sts)
}

/// Creates the tenant's cluster Secret (the token its pods present to each other) with a
/// random token, unless it exists: the token is never rewritten, since a pod still running
/// with the old one could not gather from the others. True when it was created.
async fn ensure_cluster_secret(v: &ValidTenant, client: &Client) -> Result<bool, Error> {
    let name = builders::cluster_secret_name(&v.name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &v.namespace);
    let wrap = |source| Error::Apply {
        kind: "Secret",
        name: name.clone(),
        source,
    };
    if secrets.get_opt(&name).await.map_err(wrap)?.is_some() {
        return Ok(false);
    }
    let token = random_token().map_err(Error::Random)?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(v.namespace.clone()),
            labels: Some(builders::labels(&v.name)),
            owner_references: Some(vec![builders::owner_reference(v)]),
            ..Default::default()
        },
        string_data: Some(std::collections::BTreeMap::from([(
            crate::validate::CLUSTER_TOKEN_FILE.to_string(),
            token,
        )])),
        ..Default::default()
    };
    match secrets.create(&Default::default(), &secret).await {
        Ok(_) => Ok(true),
        // Another reconcile created it first: keep that one.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(wrap(e)),
    }
}

/// 32 random bytes from the kernel, as hex.
fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The Cleanup branch: applies the reclaim policy to the tenant's volumes. Everything else
/// is owned by the tenant and goes with it through garbage collection.
async fn cleanup(tenant: &IngestTenant, ctx: &Context) -> Result<Action, Error> {
    let ns = tenant.namespace().ok_or(Error::NoNamespace)?;
    let name = tenant.name_any();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let claims = pvcs
        .list(&ListParams::default().labels(&builders::selector_string(&name)))
        .await?;
    let names: Vec<String> = claims.items.iter().map(|c| c.name_any()).collect();
    match tenant.spec.storage.reclaim_policy {
        ReclaimPolicy::Delete => {
            for n in &names {
                match pvcs.delete(n, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if !names.is_empty() {
                let msg = format!(
                    "deleting {} PersistentVolumeClaim(s) (storage.reclaimPolicy Delete): {}",
                    names.len(),
                    names.join(", ")
                );
                ctx.event(tenant, EventType::Normal, "VolumesDeleted", "Delete", msg)
                    .await;
            }
        }
        ReclaimPolicy::Retain => {
            if !names.is_empty() {
                let msg = format!(
                    "keeping {} PersistentVolumeClaim(s) (storage.reclaimPolicy Retain): {}; \
                     a tenant of the same name reuses them, or delete them by hand",
                    names.len(),
                    names.join(", ")
                );
                ctx.event(tenant, EventType::Normal, "VolumesRetained", "Delete", msg)
                    .await;
            }
        }
    }
    info!(tenant = %builders::tenant_key(tenant), policy = tenant.spec.storage.reclaim_policy.as_str(), volumes = names.len(), "tenant deleted");
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ErrorResponse;

    fn api_err(code: u16) -> kube::Error {
        kube::Error::Api(ErrorResponse {
            status: "Failure".into(),
            message: "m".into(),
            reason: "r".into(),
            code,
        })
    }

    #[test]
    fn error_labels_are_bounded_kinds() {
        assert_eq!(Error::Kube(api_err(409)).metric_label(), "Conflict");
        assert_eq!(Error::Kube(api_err(503)).metric_label(), "ServerError");
        let apply = Error::Apply {
            kind: "StatefulSet",
            name: "x".into(),
            source: api_err(422),
        };
        assert_eq!(apply.metric_label(), "ApplyInvalid");
        let wrapped = Error::Finalizer(Box::new(kube::runtime::finalizer::Error::ApplyFailed(
            Error::InvalidSpec(SpecError::EmptyImage),
        )));
        assert_eq!(wrapped.metric_label(), "InvalidSpec");
        assert_eq!(wrapped.requeue_after(), Duration::from_secs(300));
        let conflict = Error::Finalizer(Box::new(kube::runtime::finalizer::Error::ApplyFailed(
            Error::Apply {
                kind: "ConfigMap",
                name: "x".into(),
                source: api_err(409),
            },
        )));
        assert_eq!(conflict.requeue_after(), Duration::from_secs(1));
        assert_eq!(
            Error::Kube(api_err(500)).requeue_after(),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let s = truncate("é".repeat(600), 1000);
        assert!(s.len() <= 1003);
        assert!(s.ends_with('…'));
    }
}
