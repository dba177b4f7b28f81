//! The server pod: the StatefulSet of a tenant, and the pieces of its pod template that the
//! calibration pod ([`crate::calibration`]) shares with it, so that what is measured runs
//! exactly like what serves: the server container, its mounts, security and the volumes
//! holding its configuration, cluster token and auth tokens.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, HTTPGetAction, KeyToPath, Lifecycle, LifecycleHandler, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, SeccompProfile, SecretVolumeSource, SecurityContext, SleepAction,
    Volume, VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    cluster_secret_name, config_map_name, headless_service_name, labels, meta,
    peers_config_map_name, selector_labels, Observed, CONFIG_HASH_ANNOTATION, DATA_VOLUME, RUN_AS,
    TOKENS_HASH_ANNOTATION,
};
use crate::crd::{AuthSpec, ReclaimPolicy};
use crate::validate::{
    ValidTenant, CLUSTER_DIR, CLUSTER_TOKEN_FILE, CONFIG_DIR, CONFIG_FILE, DATA_DIR, HTTP_PORT,
    PEERS_DIR, TOKENS_DIR, TOKENS_FILE,
};

/// The volume of the server's peer list.
pub const PEERS_VOLUME: &str = "peers";
/// The name of the server container, in the StatefulSet and the calibration pod.
pub const SERVER_CONTAINER: &str = "sluice-server";
/// How long a deleted server pod keeps serving before it is told to stop (a `preStop` sleep).
///
/// Why: a deleted pod leaves its Service's endpoints at once, but each node's kube-proxy
/// learns of it a moment later; a server that closed its listener on SIGTERM right away
/// refused the connections sent to it meanwhile (a read through the Service failed with
/// "connection refused" when a scale-down deleted an empty pod the readiness probe had not
/// yet marked unready). The sleep counts against the termination grace period, which
/// keeps 10 seconds beyond the server's shutdown timeout for it.
pub const ENDPOINT_GRACE_SECONDS: i64 = 3;

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

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

/// Where the server container finds its configuration, data, scratch space, peers, cluster
/// token and (with auth) tokens. The volumes of these names differ between the StatefulSet
/// (a claim for the data, the peer list) and the calibration pod (scratch for both).
pub fn server_mounts(auth: Option<&AuthSpec>) -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount("config", CONFIG_DIR, true),
        mount(DATA_VOLUME, DATA_DIR, false),
        mount("tmp", "/tmp", false),
        mount(PEERS_VOLUME, PEERS_DIR, true),
        mount("cluster", CLUSTER_DIR, true),
    ];
    if auth.is_some() {
        mounts.push(tokens_mount());
    }
    mounts
}

/// The auth tokens, read-only.
pub fn tokens_mount() -> VolumeMount {
    mount("tokens", TOKENS_DIR, true)
}

/// The rendered configuration (the tenant's ConfigMap).
pub fn config_volume(v: &ValidTenant) -> Volume {
    Volume {
        name: "config".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map_name(&v.name),
            default_mode: Some(0o444),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An emptyDir of at most `size`.
pub fn scratch_volume(name: &str, size: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(size.into())),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The token the tenant's pods present to each other (the tenant's cluster Secret).
pub fn cluster_volume(v: &ValidTenant) -> Volume {
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
    }
}

/// The tenant's token Secret, its key as the tokens file.
pub fn tokens_volume(auth: &AuthSpec) -> Volume {
    Volume {
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
    }
}

/// Non-root, read-only root filesystem, no capabilities, no privilege escalation.
pub fn container_security() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        read_only_root_filesystem: Some(true),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod runs as [`RUN_AS`], its volumes group-owned by it, with the runtime's seccomp
/// profile.
pub fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
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
    }
}

/// The server container with the tenant's image, resources and configuration; the server
/// gives up draining after `shutdown_timeout_s`. No probes: the caller adds what its pod needs.
pub fn server_container(v: &ValidTenant, shutdown_timeout_s: i64) -> Container {
    let spec = &v.spec;
    Container {
        name: SERVER_CONTAINER.into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().into()),
        args: Some(vec![
            "--config".into(),
            format!("{CONFIG_DIR}/{CONFIG_FILE}"),
            "--shutdown-timeout".into(),
            format!("{shutdown_timeout_s}s"),
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
        resources: spec.resources.clone(),
        security_context: Some(container_security()),
        volume_mounts: Some(server_mounts(spec.auth.as_ref())),
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
/// - a deleted pod serves for [`ENDPOINT_GRACE_SECONDS`] more, until every node routes the
///   Service elsewhere;
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

    let mut volumes = vec![
        config_volume(v),
        scratch_volume("tmp", "1Gi"),
        Volume {
            name: PEERS_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: peers_config_map_name(&v.name),
                default_mode: Some(0o444),
                ..Default::default()
            }),
            ..Default::default()
        },
        cluster_volume(v),
    ];
    if let Some(auth) = &spec.auth {
        volumes.push(tokens_volume(auth));
    }

    let container = Container {
        readiness_probe: Some(http_probe("/ready", 5, 2, 3)),
        liveness_probe: Some(http_probe("/health", 10, 5, 6)),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                sleep: Some(SleepAction {
                    seconds: ENDPOINT_GRACE_SECONDS,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..server_container(v, shutdown_timeout)
    };

    let scheduling = &spec.scheduling;
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        termination_grace_period_seconds: Some(spec.termination_grace_period_seconds),
        security_context: Some(pod_security()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::tokens_hash;
    use crate::crd::{AuthSpec, SchedulingSpec, SecretKeyRef};
    use crate::testing::{spec, valid};

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
        let pre_stop = c.lifecycle.as_ref().unwrap().pre_stop.as_ref().unwrap();
        assert_eq!(
            pre_stop.sleep.as_ref().map(|s| s.seconds),
            Some(ENDPOINT_GRACE_SECONDS)
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
}
