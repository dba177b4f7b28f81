//! The reconciler: validate -> decommission -> dereference -> build -> apply -> calibration ->
//! status, wrapped in a finalizer that applies the storage reclaim policy on deletion. This
//! module is the driver; each stage that talks to the API server has a module of its own.
//!
//! Writes happen only when something changed: objects go through server-side apply (a no-op
//! when identical, so their resourceVersions stay put), the status is written only when it
//! differs, and Events are published only for decisions (something created, changed, scaled,
//! refused) — never "reconciled, nothing to do". That is why restarting the operator never
//! restarts a tenant's pods.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

mod apply;
mod cleanup;
mod dereference;
mod error;
mod report;

pub use apply::Outcome;
pub use error::Error;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{finalizer, Event as FinalizerEvent};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::builders::{self, MANAGED_BY_LABEL};
use crate::crd::{IngestTenant, Phase, FIELD_MANAGER, FINALIZER};
use crate::metrics::Metrics;
use crate::status::{self, Observation, Problem};
use crate::validate::{validate, ValidTenant};

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
            FinalizerEvent::Apply(t) => apply_branch(&t, &ctx).await,
            FinalizerEvent::Cleanup(t) => cleanup::cleanup(&t, &ctx).await,
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

/// How often a scale-down under way is looked at.
const DECOMMISSION_POLL: Duration = Duration::from_secs(5);

/// The Apply branch: validate, decommission, build, apply, report.
async fn apply_branch(tenant: &IngestTenant, ctx: &Context) -> Result<Action, Error> {
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
            report::update_status(tenant, ctx, &obs).await?;
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
    let (observed, token_problem) = dereference::observe_tokens(&valid, &ctx.client).await?;
    let objects = builders::build(&running, &observed);

    // Stage 4: apply.
    let mut problems: Vec<Problem> = token_problem.into_iter().collect();
    if let Some(why) = &leave.refused {
        problems.push(Problem::DecommissionRefused(format!(
            "scale-down waits: the receiving pod refuses the leaving pod's data: {why}"
        )));
    }
    let applied = apply::apply_all(tenant, ctx, &running, &objects).await;
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
            report::update_status(tenant, ctx, &obs).await?;
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
    let st = report::update_status(tenant, ctx, &obs).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_notes_are_cut_on_a_char_boundary() {
        let s = truncate("é".repeat(600), 1000);
        assert!(s.len() <= 1003);
        assert!(s.ends_with('…'));
    }
}
