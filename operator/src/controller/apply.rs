//! The apply stage: every built object goes through server-side apply (a no-op when
//! identical, so resourceVersions stay put), and each decision is an Event.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Context, Error};
use crate::builders::{self, TenantObjects, CONFIG_HASH_ANNOTATION};
use crate::crd::{IngestTenant, FIELD_MANAGER};
use crate::metrics::Metrics;
use crate::validate::ValidTenant;

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

/// Applies every object, publishing an Event for each decision. Returns the StatefulSet as the
/// API server has it (with status) for the status stage.
pub(super) async fn apply_all(
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

    // Every object by name: one the builders add cannot be left unapplied.
    let TenantObjects {
        config_map,
        peers_config_map,
        headless_service,
        client_service,
        stateful_set,
        pod_disruption_budget,
    } = o;

    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), ns);
    let (cm_before, _, outcome) = apply_object(&cms, config_map, "ConfigMap", m).await?;
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

    let (_, _, outcome) = apply_object(&cms, peers_config_map, "ConfigMap", m).await?;
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
    let (_, _, outcome) = apply_object(&svcs, headless_service, "Service", m).await?;
    note(
        outcome,
        format!("Service {}", builders::headless_service_name(&v.name)),
    );
    let (_, _, outcome) = apply_object(&svcs, client_service, "Service", m).await?;
    note(outcome, format!("Service {}", v.name));

    let stss: Api<StatefulSet> = Api::namespaced(c.clone(), ns);
    let (sts_before, sts, outcome) = apply_object(&stss, stateful_set, "StatefulSet", m).await?;
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
        apply_object(&pdbs, pod_disruption_budget, "PodDisruptionBudget", m).await?;
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
