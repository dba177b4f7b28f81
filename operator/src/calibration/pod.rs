//! The calibration pod, as a pure function of the tenant and the calibration wanted: two
//! containers from the tenant's own image. `sluice-server` runs exactly as the tenant's pods
//! do (their image, resources, rendered configuration and security) on scratch volumes, with
//! no peers; `sluice-load` waits for it to be ready, searches its knee with the payload
//! wanted, and leaves its summary in its termination message. The pod carries labels of its
//! own, so no Service, disruption budget or StatefulSet of the tenant selects it; the tenant
//! owns it, so it goes with the tenant.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::want::Want;
use crate::builders::pod::{
    cluster_volume, config_volume, container_security, pod_security, scratch_volume,
    server_container, tokens_mount, tokens_volume, PEERS_VOLUME,
};
use crate::builders::{
    owner_reference, COMPONENT_LABEL, DATA_VOLUME, INSTANCE_LABEL, MANAGED_BY_LABEL, NAME_LABEL,
};
use crate::crd::{PayloadFormat, FIELD_MANAGER};
use crate::validate::{ValidTenant, HTTP_PORT, TOKENS_DIR, TOKENS_FILE};

/// `app.kubernetes.io/name` of calibration pods (the tenant's pods are `sluice-server`).
pub const APP_NAME: &str = "sluice-calibration";
pub const COMPONENT: &str = "calibration";
/// The capacity hash the pod measures.
pub const HASH_LABEL: &str = "sluice.dev/capacity-hash";
pub const LOAD_CONTAINER: &str = "sluice-load";
/// Where the image carries the load generator (`images/rootfs`).
pub const LOAD_BINARY: &str = "/usr/local/bin/sluice-load";
/// The measurement the ramp writes (on the scratch pod only).
pub const MEASUREMENT: &str = "sluice_calibration";
/// The database the ramp writes when the tenant lists none (and creates them on first write).
pub const FALLBACK_DATABASE: &str = "calibration";

/// The search: from 10,000 points/s (or two requests a second, whichever is more), up by half
/// a step at a time to at most 50 M, in 10 s steps after a 5 s warm-up; then, after 15 s of
/// rest, four refining steps between the last rate that kept up and the first that did not
/// (the knee within a tenth); then the highest rate that passed runs again, up to three steps,
/// until it passed twice and more often than it failed (a rate that failed more often is not
/// the knee, and the next one below is run again in turn). Ten seconds hold enough requests for a steady p95 on a pod whose
/// CPU limit throttles it in 100 ms periods; growing by half (not doubling) keeps the failing
/// step's backlog small enough for the rest to clear it. A pod of 300m takes 6-8 steps, one of
/// two full CPUs about 15, and the confirmation 10-75 s more: one to four minutes.
pub const START_PPS: i64 = 10_000;
pub const MAX_PPS: i64 = 50_000_000;
pub const STEP: &str = "10s";
pub const WARMUP: &str = "5s";
pub const SETTLE: &str = "15s";
pub const GROWTH: &str = "1.5";
pub const REFINE: usize = 4;
/// Steps that run the highest passing rate again: one refining step on a 300m pod passed at
/// 22,500 points/s where three ramps by hand passed at most 16,500, and another time 15,000
/// failed once where every ramp by hand passed it; a majority of its runs decides.
pub const CONFIRM: usize = 3;
/// Connections of the generator: requests in flight at most.
pub const CONNECTIONS: usize = 16;
/// How long the generator waits for the server to be ready.
pub const READY_WITHIN: &str = "120s";

/// Labels of the calibration pods of `tenant`, for listing them.
pub fn selector(tenant: &str) -> String {
    format!("{NAME_LABEL}={APP_NAME},{INSTANCE_LABEL}={tenant},{COMPONENT_LABEL}={COMPONENT}")
}

fn labels(tenant: &str, hash: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), APP_NAME.to_string()),
        (INSTANCE_LABEL.to_string(), tenant.to_string()),
        (MANAGED_BY_LABEL.to_string(), FIELD_MANAGER.to_string()),
        (COMPONENT_LABEL.to_string(), COMPONENT.to_string()),
        (HASH_LABEL.to_string(), hash.to_string()),
    ])
}

/// The database the ramp writes: the tenant's first, or one the server creates on the first
/// write. `None` when the tenant lists none and creates none.
pub fn database(v: &ValidTenant) -> Option<String> {
    match v.spec.databases.first() {
        Some(db) => Some(db.name.clone()),
        None if v.spec.auto_create_databases => Some(FALLBACK_DATABASE.into()),
        None => None,
    }
}

/// The load generator's default resources: enough to offer several million points a second,
/// bounded so that a small node can run it beside the tenant.
pub fn default_load_resources() -> ResourceRequirements {
    let q = |cpu: &str, mem: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(mem.into())),
        ])
    };
    ResourceRequirements {
        requests: Some(q("100m", "128Mi")),
        limits: Some(q("1", "512Mi")),
        ..Default::default()
    }
}

/// `sluice-load`'s arguments.
pub fn load_args(v: &ValidTenant, want: &Want, db: &str, p95_target_ms: f64) -> Vec<String> {
    let p = &want.payload;
    let start = START_PPS.max(2 * p.points_per_request);
    let mut args: Vec<String> = [
        "--url",
        &format!("http://127.0.0.1:{HTTP_PORT}"),
        "--db",
        db,
        "--measurement",
        MEASUREMENT,
        "--wait-ready",
        READY_WITHIN,
        "--search",
        &format!("{start}:{}", MAX_PPS.max(start)),
        "--growth",
        GROWTH,
        "--refine",
        &REFINE.to_string(),
        "--confirm",
        &CONFIRM.to_string(),
        "--step",
        STEP,
        "--warmup",
        WARMUP,
        "--settle",
        SETTLE,
        "--points",
        &p.points_per_request.to_string(),
        "--series",
        &p.series.to_string(),
        "--fields",
        &p.fields.to_string(),
        "--format",
        match p.format {
            PayloadFormat::Lp => "lp",
            PayloadFormat::Msgpack => "msgpack",
        },
        "--connections",
        &CONNECTIONS.to_string(),
        "--timeout",
        "5s",
        // The knee as the autoscaler judges live windows: p95 under the target, no relative
        // bound (live traffic has no lightest step to compare with).
        "--p95-max",
        &format!("{}ms", p95_target_ms.round()),
        "--p95-factor",
        "0",
        "--summary",
        "/dev/termination-log",
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if p.gzip {
        args.push("--gzip".into());
    }
    if v.spec.auth.is_some() {
        args.extend(["--token-file".into(), format!("{TOKENS_DIR}/{TOKENS_FILE}")]);
    }
    args
}

/// The calibration pod for `want`, or `None` when there is no database it could write to.
pub fn build(v: &ValidTenant, want: &Want, p95_target_ms: f64) -> Option<Pod> {
    let db = database(v)?;
    let spec = &v.spec;
    let calibration = &spec.autoscaling.calibration;
    let mut volumes = vec![
        config_volume(v),
        scratch_volume(DATA_VOLUME, &spec.storage.size),
        scratch_volume("tmp", "1Gi"),
        // No peer list: the scratch server gathers from no one, and no one from it.
        scratch_volume(PEERS_VOLUME, "1Mi"),
        cluster_volume(v),
    ];
    let mut load_mounts = Vec::new();
    if let Some(auth) = &spec.auth {
        volumes.push(tokens_volume(auth));
        load_mounts.push(tokens_mount());
    }
    let load = Container {
        name: LOAD_CONTAINER.into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().into()),
        command: Some(vec![LOAD_BINARY.into()]),
        args: Some(load_args(v, want, &db, p95_target_ms)),
        resources: Some(
            calibration
                .load_resources
                .clone()
                .unwrap_or_else(default_load_resources),
        ),
        security_context: Some(container_security()),
        // The summary is the message; should the generator fail before writing one, the
        // kubelet puts the end of its output there instead.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: (!load_mounts.is_empty()).then_some(load_mounts),
        ..Default::default()
    };
    let scheduling = &spec.scheduling;
    Some(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-calibration-", v.name)),
            namespace: Some(v.namespace.clone()),
            labels: Some(labels(&v.name, &want.capacity_hash)),
            owner_references: Some(vec![owner_reference(v)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            // Scratch data: a quick stop is all it needs.
            containers: vec![server_container(v, 5), load],
            volumes: Some(volumes),
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(want.timeout.as_secs() as i64),
            termination_grace_period_seconds: Some(10),
            security_context: Some(pod_security()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            affinity: scheduling.affinity.clone(),
            node_selector: scheduling.node_selector.clone(),
            tolerations: scheduling.tolerations.clone(),
            priority_class_name: scheduling.priority_class_name.clone(),
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{selector_labels, stateful_set, Observed};
    use crate::calibration::want::want;
    use crate::crd::{AuthSpec, SecretKeyRef};
    use crate::testing::{spec, tenant, valid};
    use std::time::Duration;

    fn built(s: crate::crd::IngestTenantSpec) -> (Pod, Want) {
        let mut s = s;
        s.autoscaling.enabled = true;
        let w = want(&tenant(s.clone()), Duration::from_secs(300)).unwrap_or_else(|| panic!("on"));
        let pod = build(&valid(s), &w, 250.0).unwrap_or_else(|| panic!("a pod"));
        (pod, w)
    }

    #[test]
    fn the_server_runs_as_the_tenants_pods_do_on_scratch_volumes() {
        let mut s = spec();
        s.resources = Some(default_load_resources());
        s.storage.size = "3Gi".into();
        let (pod, w) = built(s.clone());
        let p = pod.spec.as_ref().unwrap_or_else(|| panic!("spec"));
        let sts = stateful_set(&valid(s), &Observed::default());
        let tmpl = sts.spec.and_then(|s| s.template.spec).unwrap_or_default();
        let server = &p.containers[0];
        let tenant_server = &tmpl.containers[0];
        // Same image, resources, configuration, mounts and security as the tenant's pods.
        assert_eq!(server.image, tenant_server.image);
        assert_eq!(server.resources, tenant_server.resources);
        assert_eq!(server.volume_mounts, tenant_server.volume_mounts);
        assert_eq!(server.security_context, tenant_server.security_context);
        assert_eq!(
            server.args.as_ref().map(|a| a[1].clone()),
            Some("/etc/sluice/sluice.toml".into())
        );
        assert_eq!(p.security_context, tmpl.security_context);
        let vol = |name: &str| {
            p.volumes
                .iter()
                .flatten()
                .find(|v| v.name == name)
                .cloned()
                .unwrap_or_else(|| panic!("volume {name}"))
        };
        assert_eq!(
            vol("config").config_map.map(|c| c.name),
            Some("acme-config".into())
        );
        let data = vol("data").empty_dir.unwrap_or_default();
        assert_eq!(data.size_limit, Some(Quantity("3Gi".into())));
        assert!(vol("peers").empty_dir.is_some(), "no peer list");
        assert_eq!(p.restart_policy.as_deref(), Some("Never"));
        assert_eq!(p.active_deadline_seconds, Some(300));
        assert_eq!(p.automount_service_account_token, Some(false));
        // Labelled apart from the tenant's pods, owned by the tenant.
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[HASH_LABEL], w.capacity_hash);
        assert_eq!(labels[NAME_LABEL], APP_NAME);
        let sel = selector_labels("acme");
        assert!(
            !sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "the tenant's Services would select it"
        );
        assert_eq!(
            pod.metadata.owner_references.unwrap_or_default()[0].uid,
            "1234"
        );
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some("acme-calibration-")
        );
    }

    #[test]
    fn the_load_searches_the_knee_with_the_payload_wanted() {
        let mut s = spec();
        s.autoscaling.calibration.payload.points_per_request = Some(20_000);
        s.autoscaling.calibration.payload.gzip = Some(true);
        let (pod, _) = built(s);
        let load = &pod.spec.unwrap_or_default().containers[1];
        assert_eq!(load.name, LOAD_CONTAINER);
        assert_eq!(load.command, Some(vec![LOAD_BINARY.to_string()]));
        let args = load.args.clone().unwrap_or_default().join(" ");
        for want in [
            "--url http://127.0.0.1:8086 --db telegraf",
            "--search 40000:50000000",
            "--points 20000 --series 1000 --fields 5 --format lp",
            "--p95-max 250ms --p95-factor 0 --summary /dev/termination-log",
            "--growth 1.5 --refine 4 --confirm 3 --step 10s --warmup 5s --settle 15s",
            "--gzip",
        ] {
            assert!(args.contains(want), "{want} in {args}");
        }
        assert!(!args.contains("--token-file"));
        assert_eq!(
            load.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        assert_eq!(load.resources, Some(default_load_resources()));
    }

    #[test]
    fn auth_gives_the_load_the_token_and_no_database_means_no_pod() {
        let mut s = spec();
        s.auth = Some(AuthSpec {
            token_secret_ref: SecretKeyRef {
                name: "acme-tokens".into(),
                key: "tokens".into(),
            },
        });
        let (pod, w) = built(s.clone());
        let load = &pod.spec.unwrap_or_default().containers[1];
        let args = load.args.clone().unwrap_or_default().join(" ");
        assert!(
            args.ends_with("--token-file /etc/sluice/auth/tokens"),
            "{args}"
        );
        assert_eq!(load.volume_mounts.as_ref().map(Vec::len), Some(1));
        s.databases.clear();
        assert_eq!(
            database(&valid(s.clone())).as_deref(),
            Some(FALLBACK_DATABASE)
        );
        s.auto_create_databases = false;
        assert!(build(&valid(s), &w, 250.0).is_none());
    }
}
