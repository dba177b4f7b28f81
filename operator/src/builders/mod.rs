//! Stage 2 of a reconcile: the Kubernetes objects of a tenant, as pure functions of a
//! [`ValidTenant`].
//!
//! Nothing here talks to the API server or reads a clock, so the same tenant always yields
//! byte-identical objects. That is what makes the apply stage idempotent: server-side apply of
//! an unchanged object is a no-op, so a reconcile (or an operator restart) that finds nothing
//! new writes nothing and never restarts a pod. Only fields the operator has an opinion on are
//! set; everything else is left to API-server defaulting and other field managers.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::crd::IngestTenant;
use crate::validate::{ValidTenant, CONFIG_FILE, HTTP_PORT, PEERS_FILE};

pub mod pod;

pub use pod::stateful_set;

/// Pod-template annotation holding the configuration hash: a new hash is a new pod template,
/// so the StatefulSet rolls the pods onto the new configuration.
pub const CONFIG_HASH_ANNOTATION: &str = "sluice.dev/config-hash";
/// Pod-template annotation holding a hash of the token Secret's data: the server reads its
/// tokens at start-up, so rotating them must roll the pods too.
pub const TOKENS_HASH_ANNOTATION: &str = "sluice.dev/tokens-hash";
/// Label naming the tenant on every object (and the PVCs), used to find them again.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
pub const APP_NAME: &str = "sluice-server";
/// The user and group the server runs as (the distroless "nonroot" ids).
pub const RUN_AS: i64 = 65532;
/// Name of the data volume claim template; PVCs are `data-<tenant>-<ordinal>`.
pub const DATA_VOLUME: &str = "data";

/// Every object of one tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantObjects {
    pub config_map: ConfigMap,
    pub peers_config_map: ConfigMap,
    pub headless_service: Service,
    pub client_service: Service,
    pub stateful_set: StatefulSet,
    pub pod_disruption_budget: PodDisruptionBudget,
}

/// Inputs the builders need beyond the spec, read from the cluster by the apply stage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Hash of the token Secret's key, when the tenant has auth and the Secret exists.
    pub tokens_hash: Option<String>,
}

pub fn config_map_name(tenant: &str) -> String {
    format!("{tenant}-config")
}
pub fn headless_service_name(tenant: &str) -> String {
    format!("{tenant}-headless")
}
pub fn peers_config_map_name(tenant: &str) -> String {
    format!("{tenant}-peers")
}
/// The Secret holding the token the tenant's pods present to each other; created once by the
/// operator with a random token (see `controller::apply::ensure_cluster_secret`).
pub fn cluster_secret_name(tenant: &str) -> String {
    format!("{tenant}-cluster")
}

/// Labels that select a tenant's pods (and PVCs). Never change them: a StatefulSet's selector
/// is immutable.
pub fn selector_labels(tenant: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), APP_NAME.to_string()),
        (INSTANCE_LABEL.to_string(), tenant.to_string()),
    ])
}

/// `selector_labels` as a label-selector string, for listing and for `/scale`.
pub fn selector_string(tenant: &str) -> String {
    selector_labels(tenant)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Labels on every object the operator creates.
pub fn labels(tenant: &str) -> BTreeMap<String, String> {
    let mut l = selector_labels(tenant);
    l.insert(MANAGED_BY_LABEL.into(), crate::crd::FIELD_MANAGER.into());
    l.insert(COMPONENT_LABEL.into(), "ingest".into());
    l
}

/// Owner reference making the tenant the controller of an object: garbage collection deletes
/// the object with the tenant, and the controller's `owns()` watches map it back.
pub fn owner_reference(v: &ValidTenant) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/v1alpha1", crate::crd::GROUP),
        kind: "IngestTenant".into(),
        name: v.name.clone(),
        uid: v.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub(crate) fn meta(v: &ValidTenant, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(v.namespace.clone()),
        labels: Some(labels(&v.name)),
        owner_references: Some(vec![owner_reference(v)]),
        ..Default::default()
    }
}

/// Builds every object of the tenant.
pub fn build(v: &ValidTenant, observed: &Observed) -> TenantObjects {
    TenantObjects {
        config_map: config_map(v),
        peers_config_map: peers_config_map(v),
        headless_service: headless_service(v),
        client_service: client_service(v),
        stateful_set: stateful_set(v, observed),
        pod_disruption_budget: pod_disruption_budget(v),
    }
}

/// The rendered server configuration.
pub fn config_map(v: &ValidTenant) -> ConfigMap {
    let mut m = meta(v, config_map_name(&v.name));
    m.annotations = Some(BTreeMap::from([(
        CONFIG_HASH_ANNOTATION.to_string(),
        v.config_hash.clone(),
    )]));
    ConfigMap {
        metadata: m,
        data: Some(BTreeMap::from([(
            CONFIG_FILE.to_string(),
            v.config_toml.clone(),
        )])),
        ..Default::default()
    }
}

/// The tenant's pods, one `host:port` per line, by their stable names under the headless
/// Service (`<tenant>-<i>.<tenant>-headless.<namespace>.svc`): a read through any pod gathers
/// from all of these. It is not part of the configuration hash, and the server reads it
/// again when the kubelet updates the mounted file, so a new replica count reaches running
/// pods without restarting them (within the kubelet's sync period, about a minute). Until
/// then the pods correct it themselves: a pod joins the running ones before it is ready and
/// leaves them once decommissioned, so the file must list a pod before it starts.
pub fn peers_config_map(v: &ValidTenant) -> ConfigMap {
    let peers: Vec<String> = (0..v.replicas.max(0)).map(|i| peer_address(v, i)).collect();
    ConfigMap {
        metadata: meta(v, peers_config_map_name(&v.name)),
        data: Some(BTreeMap::from([(
            PEERS_FILE.to_string(),
            format!("{}\n", peers.join("\n")),
        )])),
        ..Default::default()
    }
}

/// Pod `ordinal`'s stable `host:port` under the headless Service.
pub fn peer_address(v: &ValidTenant, ordinal: i32) -> String {
    format!(
        "{}-{ordinal}.{}.{}.svc:{HTTP_PORT}",
        v.name,
        headless_service_name(&v.name),
        v.namespace
    )
}

fn http_port() -> ServicePort {
    ServicePort {
        name: Some("http".into()),
        port: HTTP_PORT,
        target_port: Some(IntOrString::String("http".into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// The StatefulSet's governing Service: stable DNS names per pod
/// (`<tenant>-0.<tenant>-headless`). Not-ready pods are published too, so that a pod replaying
/// its WAL is still addressable for debugging and peers.
pub fn headless_service(v: &ValidTenant) -> Service {
    Service {
        metadata: meta(v, headless_service_name(&v.name)),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(&v.name)),
            ports: Some(vec![http_port()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The Service clients (Telegraf, InfluxDB clients) write to: ready pods only.
pub fn client_service(v: &ValidTenant) -> Service {
    Service {
        metadata: meta(v, v.name.clone()),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector_labels(&v.name)),
            ports: Some(vec![http_port()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// At most one pod of a tenant down for voluntary disruptions (drains), so a rolling node
/// upgrade never takes a multi-replica tenant offline.
pub fn pod_disruption_budget(v: &ValidTenant) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(v, v.name.clone()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(&v.name)),
                ..Default::default()
            }),
            // A pod that never became ready (crash loop, bad image) must not block a drain.
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Hash of the token Secret's value (not the value itself), for [`TOKENS_HASH_ANNOTATION`].
pub fn tokens_hash(data: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(data))
}

/// The tenant's name and namespace as a reference, for messages.
pub fn tenant_key(t: &IngestTenant) -> String {
    format!(
        "{}/{}",
        t.metadata.namespace.as_deref().unwrap_or(""),
        t.metadata.name.as_deref().unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{spec, valid};
    use sluice_core::config::ServerConfig;

    #[test]
    fn every_object_is_owned_labelled_and_namespaced() {
        let v = valid(spec());
        let o = build(&v, &Observed::default());
        let metas = [
            &o.config_map.metadata,
            &o.peers_config_map.metadata,
            &o.headless_service.metadata,
            &o.client_service.metadata,
            &o.stateful_set.metadata,
            &o.pod_disruption_budget.metadata,
        ];
        for m in metas {
            assert_eq!(m.namespace.as_deref(), Some("tenants"));
            let owners = m.owner_references.as_ref().unwrap();
            assert_eq!(owners.len(), 1);
            assert_eq!(owners[0].uid, "1234");
            assert_eq!(owners[0].kind, "IngestTenant");
            assert_eq!(owners[0].api_version, "sluice.dev/v1alpha1");
            assert_eq!(owners[0].controller, Some(true));
            let l = m.labels.as_ref().unwrap();
            assert_eq!(l[INSTANCE_LABEL], "acme");
            assert_eq!(l[MANAGED_BY_LABEL], "sluice-operator");
        }
        assert_eq!(o.config_map.metadata.name.as_deref(), Some("acme-config"));
        assert_eq!(
            o.headless_service.metadata.name.as_deref(),
            Some("acme-headless")
        );
        assert_eq!(o.client_service.metadata.name.as_deref(), Some("acme"));
    }

    #[test]
    fn config_map_holds_the_rendered_config() {
        let v = valid(spec());
        let cm = config_map(&v);
        let body = &cm.data.as_ref().unwrap()["sluice.toml"];
        let cfg: ServerConfig = toml::from_str(body).unwrap();
        assert_eq!(cfg, v.config);
        assert_eq!(cfg.databases[0].name, "telegraf");
        assert_eq!(
            cm.metadata.annotations.unwrap()[CONFIG_HASH_ANNOTATION],
            v.config_hash
        );
    }

    #[test]
    fn peers_are_every_ordinal_by_its_stable_name() {
        let v = valid(spec());
        let cm = peers_config_map(&v);
        assert_eq!(cm.metadata.name.as_deref(), Some("acme-peers"));
        assert_eq!(
            cm.data.unwrap()["peers"],
            "acme-0.acme-headless.tenants.svc:8086\nacme-1.acme-headless.tenants.svc:8086\nacme-2.acme-headless.tenants.svc:8086\n"
        );
        // The server reads them, and its token, from where they are mounted.
        let cfg = &v.config;
        assert_eq!(
            cfg.cluster.peers_file.as_deref(),
            Some("/etc/sluice/peers/peers")
        );
        assert_eq!(
            cfg.cluster.token_file.as_deref(),
            Some("/etc/sluice/cluster/token")
        );
    }

    #[test]
    fn services_select_the_pods() {
        let v = valid(spec());
        let h = headless_service(&v).spec.unwrap();
        assert_eq!(h.cluster_ip.as_deref(), Some("None"));
        assert_eq!(h.publish_not_ready_addresses, Some(true));
        assert_eq!(h.selector.unwrap(), selector_labels("acme"));
        let c = client_service(&v).spec.unwrap();
        assert_eq!(c.cluster_ip, None);
        assert_eq!(c.ports.unwrap()[0].port, 8086);
        assert_eq!(
            selector_string("acme"),
            "app.kubernetes.io/instance=acme,app.kubernetes.io/name=sluice-server"
        );
    }

    #[test]
    fn pdb_allows_one_disruption() {
        let pdb = pod_disruption_budget(&valid(spec())).spec.unwrap();
        assert_eq!(pdb.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(
            pdb.selector.unwrap().match_labels.unwrap(),
            selector_labels("acme")
        );
    }

    #[test]
    fn building_is_deterministic() {
        let a = build(&valid(spec()), &Observed::default());
        let b = build(&valid(spec()), &Observed::default());
        assert_eq!(a, b);
        assert_eq!(
            serde_json::to_string(&a.stateful_set).unwrap(),
            serde_json::to_string(&b.stateful_set).unwrap()
        );
    }
}
