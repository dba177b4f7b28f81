//! Stage 2 of a reconcile: the Kubernetes objects of a tenant, as pure functions of a
//! [`ValidTenant`].
//!
//! Nothing here talks to the API server or reads a clock, so the same tenant always yields
//! byte-identical objects. That is what makes the apply stage idempotent: server-side apply of
//! an unchanged object is a no-op, so a reconcile (or an operator restart) that finds nothing
//! new writes nothing and never restarts a pod. Only fields the operator has an opinion on are
//! set; everything else is left to API-server defaulting and other field managers.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort,
    EmptyDirVolumeSource, EnvVar, HTTPGetAction, KeyToPath, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, SeccompProfile, SecretVolumeSource, SecurityContext, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
    WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::crd::{IngestTenant, ReclaimPolicy};
use crate::validate::{
    ValidTenant, CLUSTER_DIR, CLUSTER_TOKEN_FILE, CONFIG_DIR, CONFIG_FILE, DATA_DIR, HTTP_PORT,
    PEERS_DIR, PEERS_FILE, TOKENS_DIR, TOKENS_FILE,
};

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
/// operator with a random token (see `controller::ensure_cluster_secret`).
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

fn meta(v: &ValidTenant, name: String) -> ObjectMeta {
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
/// pods without restarting them (within the kubelet's sync period, about a minute).
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
/// The volumes of pods a scale-down removes: as `storage.scaleDownPolicy` says, since such a
/// pod handed its data over first; kept at zero replicas, where none did (see
/// [`crate::decommission`]).
fn when_scaled(v: &ValidTenant) -> ReclaimPolicy {
    if v.replicas == 0 {
        ReclaimPolicy::Retain
    } else {
        v.spec.storage.scale_down_policy
    }
}

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

fn default_affinity(tenant: &str) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: PodAffinityTerm {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(selector_labels(tenant)),
                            ..Default::default()
                        }),
                        topology_key: "kubernetes.io/hostname".into(),
                        ..Default::default()
                    },
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn http_probe(path: &str, period: i32, timeout: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("http".into()),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        failure_threshold: Some(failures),
        success_threshold: Some(1),
        ..Default::default()
    }
}

/// The server pods. Shaped by what the server needs to be safe:
/// - one PVC per pod (`volumeClaimTemplates`) holds the WAL and chDB data; the reclaim policy
///   decides whether it outlives the tenant (`persistentVolumeClaimRetentionPolicy`), and
///   scale-down always keeps it so that scaling up again finds the data;
/// - readiness on `/ready` (200 only once the WAL is replayed), liveness on `/health`;
/// - non-root, read-only root filesystem, no capabilities; `/tmp` is an emptyDir;
/// - a termination grace period long enough to drain and flush, and the server told to stop
///   trying 10 seconds before the kubelet would kill it;
/// - the configuration (and tokens) hash on the pod template, so a change rolls the pods;
/// - `Parallel` pod management: pods do not depend on each other, so scaling is not serialised.
pub fn stateful_set(v: &ValidTenant, observed: &Observed) -> StatefulSet {
    let spec = &v.spec;
    let mut annotations =
        BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_string(), v.config_hash.clone())]);
    if let Some(h) = &observed.tokens_hash {
        annotations.insert(TOKENS_HASH_ANNOTATION.to_string(), h.clone());
    }
    let shutdown_timeout = (spec.termination_grace_period_seconds - 10).max(5);

    let mut mounts = vec![
        VolumeMount {
            name: "config".into(),
            mount_path: CONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount {
            name: DATA_VOLUME.into(),
            mount_path: DATA_DIR.into(),
            ..Default::default()
        },
        VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..Default::default()
        },
        VolumeMount {
            name: "peers".into(),
            mount_path: PEERS_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount {
            name: "cluster".into(),
            mount_path: CLUSTER_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
    ];
    let mut volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name(&v.name),
                default_mode: Some(0o444),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity("1Gi".into())),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "peers".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: peers_config_map_name(&v.name),
                default_mode: Some(0o444),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "cluster".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(cluster_secret_name(&v.name)),
                items: Some(vec![KeyToPath {
                    key: CLUSTER_TOKEN_FILE.into(),
                    path: CLUSTER_TOKEN_FILE.into(),
                    ..Default::default()
                }]),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    if let Some(auth) = &spec.auth {
        mounts.push(VolumeMount {
            name: "tokens".into(),
            mount_path: TOKENS_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
        volumes.push(Volume {
            name: "tokens".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(auth.token_secret_ref.name.clone()),
                items: Some(vec![KeyToPath {
                    key: auth.token_secret_ref.key.clone(),
                    path: TOKENS_FILE.into(),
                    ..Default::default()
                }]),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
    }

    let container = Container {
        name: "sluice-server".into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().into()),
        args: Some(vec![
            "--config".into(),
            format!("{CONFIG_DIR}/{CONFIG_FILE}"),
            "--shutdown-timeout".into(),
            format!("{shutdown_timeout}s"),
        ]),
        env: Some(vec![EnvVar {
            name: "SLUICE_LOG_FORMAT".into(),
            value: Some("json".into()),
            ..Default::default()
        }]),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: HTTP_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(http_probe("/ready", 5, 2, 3)),
        liveness_probe: Some(http_probe("/health", 10, 5, 6)),
        resources: spec.resources.clone(),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        ..Default::default()
    };

    let scheduling = &spec.scheduling;
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        termination_grace_period_seconds: Some(spec.termination_grace_period_seconds),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            fs_group: Some(RUN_AS),
            fs_group_change_policy: Some("OnRootMismatch".into()),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        // The server never talks to the API server.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        affinity: Some(
            scheduling
                .affinity
                .clone()
                .unwrap_or_else(|| default_affinity(&v.name)),
        ),
        node_selector: scheduling.node_selector.clone(),
        tolerations: scheduling.tolerations.clone(),
        priority_class_name: scheduling.priority_class_name.clone(),
        ..Default::default()
    };

    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.into()),
            labels: Some(labels(&v.name)),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: spec.storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(spec.storage.size.clone()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };

    StatefulSet {
        metadata: meta(v, v.name.clone()),
        spec: Some(StatefulSetSpec {
            replicas: Some(v.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(&v.name)),
                ..Default::default()
            },
            service_name: Some(headless_service_name(&v.name)),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(0),
                    ..Default::default()
                }),
            }),
            revision_history_limit: Some(5),
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some(spec.storage.reclaim_policy.as_str().into()),
                    when_scaled: Some(when_scaled(v).as_str().into()),
                },
            ),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&v.name)),
                    annotations: Some(annotations),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            volume_claim_templates: Some(vec![claim]),
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
    use crate::crd::{
        AuthSpec, DatabaseSpec, IngestTenantSpec, RetentionPolicySpec, SchedulingSpec, SecretKeyRef,
    };
    use crate::validate::validate;
    use kube::api::ObjectMeta as Meta;
    use sluice_core::config::ServerConfig;

    fn valid(spec: IngestTenantSpec) -> ValidTenant {
        let mut t = IngestTenant::new("acme", spec);
        t.metadata = Meta {
            name: Some("acme".into()),
            namespace: Some("tenants".into()),
            uid: Some("1234".into()),
            generation: Some(3),
            ..Default::default()
        };
        validate(&t).unwrap()
    }

    fn spec() -> IngestTenantSpec {
        let mut s = IngestTenantSpec::defaults();
        s.replicas = 3;
        s.databases = vec![DatabaseSpec {
            name: "telegraf".into(),
            retention_policies: vec![RetentionPolicySpec {
                name: "autogen".into(),
                duration: "30d".into(),
                default: true,
            }],
        }];
        s
    }

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
    fn stateful_set_is_safe_and_rolls_on_config_change() {
        let v = valid(spec());
        let sts = stateful_set(&v, &Observed::default());
        let s = sts.spec.as_ref().unwrap();
        assert_eq!(s.replicas, Some(3));
        assert_eq!(s.service_name.as_deref(), Some("acme-headless"));
        assert_eq!(s.pod_management_policy.as_deref(), Some("Parallel"));
        let retention = s.persistent_volume_claim_retention_policy.as_ref().unwrap();
        assert_eq!(retention.when_deleted.as_deref(), Some("Retain"));
        assert_eq!(retention.when_scaled.as_deref(), Some("Retain"));
        let claim = &s.volume_claim_templates.as_ref().unwrap()[0];
        let cs = claim.spec.as_ref().unwrap();
        assert_eq!(
            cs.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0,
            "10Gi"
        );
        assert_eq!(cs.storage_class_name, None);

        let tmpl = &s.template;
        assert_eq!(
            tmpl.metadata
                .as_ref()
                .unwrap()
                .annotations
                .as_ref()
                .unwrap()[CONFIG_HASH_ANNOTATION],
            v.config_hash
        );
        let pod = tmpl.spec.as_ref().unwrap();
        assert_eq!(pod.termination_grace_period_seconds, Some(120));
        let psc = pod.security_context.as_ref().unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.fs_group, Some(RUN_AS));
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("sluice-server:0.1.0"));
        assert_eq!(
            c.args.as_ref().unwrap(),
            &vec![
                "--config".to_string(),
                "/etc/sluice/sluice.toml".into(),
                "--shutdown-timeout".into(),
                "110s".into()
            ]
        );
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        let ready = c
            .readiness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap();
        assert_eq!(ready.path.as_deref(), Some("/ready"));
        let live = c
            .liveness_probe
            .as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap();
        assert_eq!(live.path.as_deref(), Some("/health"));
        let mounts: Vec<_> = c
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(
            mounts,
            vec![
                "/etc/sluice",
                "/var/lib/sluice",
                "/tmp",
                "/etc/sluice/peers",
                "/etc/sluice/cluster"
            ]
        );
        let anti = pod
            .affinity
            .as_ref()
            .unwrap()
            .pod_anti_affinity
            .as_ref()
            .unwrap();
        assert_eq!(
            anti.preferred_during_scheduling_ignored_during_execution
                .as_ref()
                .unwrap()[0]
                .pod_affinity_term
                .topology_key,
            "kubernetes.io/hostname"
        );

        // A pool change is a new pod template; a replica change is not.
        let mut changed = spec();
        changed.pool.flush_workers = 4;
        let sts2 = stateful_set(&valid(changed), &Observed::default());
        assert_ne!(
            sts.spec.as_ref().unwrap().template,
            sts2.spec.unwrap().template
        );
        let mut scaled = spec();
        scaled.replicas = 5;
        let sts3 = stateful_set(&valid(scaled), &Observed::default());
        assert_eq!(
            sts.spec.as_ref().unwrap().template,
            sts3.spec.unwrap().template
        );
    }

    #[test]
    fn scale_down_policy_reaches_the_set_except_at_zero_replicas() {
        let mut s = spec();
        s.storage.scale_down_policy = ReclaimPolicy::Delete;
        let when_scaled = |replicas| {
            let mut s = s.clone();
            s.replicas = replicas;
            stateful_set(&valid(s), &Observed::default())
                .spec
                .and_then(|s| s.persistent_volume_claim_retention_policy)
                .and_then(|p| p.when_scaled)
        };
        assert_eq!(when_scaled(2).as_deref(), Some("Delete"));
        assert_eq!(when_scaled(0).as_deref(), Some("Retain"));
    }

    #[test]
    fn reclaim_delete_and_storage_class_reach_the_claims() {
        let mut s = spec();
        s.storage.reclaim_policy = ReclaimPolicy::Delete;
        s.storage.storage_class_name = Some("fast".into());
        s.storage.size = "50Gi".into();
        let sts = stateful_set(&valid(s), &Observed::default());
        let spec = sts.spec.unwrap();
        assert_eq!(
            spec.persistent_volume_claim_retention_policy
                .unwrap()
                .when_deleted
                .as_deref(),
            Some("Delete")
        );
        let claim = spec.volume_claim_templates.unwrap().remove(0).spec.unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
    }

    #[test]
    fn auth_mounts_the_secret_and_tokens_roll_the_pods() {
        let mut s = spec();
        s.auth = Some(AuthSpec {
            token_secret_ref: SecretKeyRef {
                name: "acme-tokens".into(),
                key: "list".into(),
            },
        });
        let v = valid(s);
        assert_eq!(
            v.config.auth.tokens_file.as_deref(),
            Some("/etc/sluice/auth/tokens")
        );
        let observed = Observed {
            tokens_hash: Some(tokens_hash(b"a\nb\n")),
        };
        let sts = stateful_set(&v, &observed);
        let tmpl = sts.spec.unwrap().template;
        let pod = tmpl.spec.unwrap();
        let vol = pod
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "tokens")
            .unwrap();
        let secret = vol.secret.unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("acme-tokens"));
        assert_eq!(secret.items.unwrap()[0].key, "list");
        assert_eq!(
            tmpl.metadata.unwrap().annotations.unwrap()[TOKENS_HASH_ANNOTATION],
            tokens_hash(b"a\nb\n")
        );
    }

    #[test]
    fn user_affinity_replaces_the_default() {
        let mut s = spec();
        s.scheduling = SchedulingSpec {
            affinity: Some(Affinity::default()),
            node_selector: Some(BTreeMap::from([("disk".into(), "ssd".into())])),
            ..Default::default()
        };
        let pod = stateful_set(&valid(s), &Observed::default())
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        assert_eq!(pod.affinity, Some(Affinity::default()));
        assert_eq!(pod.node_selector.unwrap()["disk"], "ssd");
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
