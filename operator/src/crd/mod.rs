//! The `IngestTenant` custom resource (`sluice.dev/v1alpha1`).
//!
//! The Rust types are the single source of the CRD: `crdgen` prints [`crd()`] to
//! `crds/ingesttenant.yaml` and a test fails when the file drifts. Every rule a user can break is
//! in the schema (OpenAPI bounds and CEL `x-kubernetes-validations` with a message), so that
//! `kubectl apply` refuses a bad tenant with a clear sentence instead of the operator discovering
//! it later. The operator still validates again ([`crate::validate`]) because an older CRD, or
//! a rule CEL cannot express (integer overflow, core's cross-checks), must never crash a
//! reconcile.
//!
//! Scale design: `spec.replicas` (a top-level integer) is the desired replica count and the
//! `/scale` subresource's `specReplicasPath`, so `kubectl scale it/acme --replicas=3` and an HPA
//! both work. `spec.scaling.{minReplicas,maxReplicas}` are bounds: the operator clamps
//! `spec.replicas` into them (with a Warning event) rather than refusing, because the autoscaler
//! and a GitOps tool may write the two fields at different times.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, ResourceRequirements, Toleration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::Rule;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sluice_core::config::{format_duration, PoolConfig};

mod autoscaling;
mod limits;
mod status;

pub use autoscaling::{
    AutoscalingSpec, CalibrationPhase, CalibrationSpec, CalibrationStatus, KneeSource, KneeStatus,
    PayloadFormat, PayloadOverride, PayloadShape, PayloadSource, PlateauStatus, ScalingDecision,
    TrafficStatus, MAX_FIELD_VALUES_PER_REQUEST,
};
pub use limits::{LimitsSpec, QuerySpec};
pub use status::{DecommissionStatus, HandoffProgress, IngestTenantStatus, Phase};

/// API group of every sluice resource.
pub const GROUP: &str = "sluice.dev";
/// The finalizer that applies the storage reclaim policy before a tenant disappears.
pub const FINALIZER: &str = "sluice.dev/reclaim-storage";
/// Field manager for every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "sluice-operator";
/// Default server image when the tenant names none.
pub const DEFAULT_IMAGE: &str = "sluice-server:0.1.0";
/// Longest tenant name: the StatefulSet's `controller-revision-hash` label value is
/// `<name>-<10 chars>` and must fit in 63, and the headless Service is `<name>-headless`.
pub const MAX_TENANT_NAME_LEN: usize = 52;

/// Durations as `sluice_core::config::parse_duration` reads them, restricted to at most nine
/// digits per group so that every string the API server accepts also parses without overflow.
pub const DURATION_PATTERN: &str = "^([0-9]{1,9}(ns|us|ms|s|m|h|d|w))+$";
/// A duration made of zeros only (`0s`, `0m0s`).
pub const ZERO_DURATION_PATTERN: &str = "^(0+(ns|us|ms|s|m|h|d|w))+$";
/// Sizes as `sluice_core::config::ByteSize` reads them, bounded the same way (no overflow).
pub const SIZE_PATTERN: &str =
    "^([0-9]{1,18}B?|[0-9]{1,7}(K|KB|Ki|KiB|M|MB|Mi|MiB|G|GB|Gi|GiB|T|TB|Ti|TiB))$";
/// Tenant names: a DNS-1035 label, since the name becomes Service and pod names.
pub const TENANT_NAME_PATTERN: &str = "^[a-z]([-a-z0-9]*[a-z0-9])?$";

fn rule_name() -> Rule {
    Rule::new(format!(
        "self.matches('{}')",
        sluice_core::names::NAME_PATTERN
    ))
    .message(
        "must start with a letter or '_' and contain only letters, digits, '_' and '-' \
         (at most 64 characters): it becomes part of chDB table names",
    )
}

fn rule_retention_duration() -> Rule {
    Rule::new(format!("self == 'inf' || self.matches('{DURATION_PATTERN}')")).message(
        "must be 'inf' or a duration such as 30d, 12h, 1h30m or 2w (units ns, us, ms, s, m, h, d, w)",
    )
}

/// Durations that must be longer than zero (a zero flush interval would spin the flusher).
fn rule_duration() -> Rule {
    Rule::new(format!(
        "self.matches('{DURATION_PATTERN}') && !self.matches('{ZERO_DURATION_PATTERN}')"
    ))
    .message(
        "must be a positive duration such as 250ms, 1s or 1m30s (units ns, us, ms, s, m, h, d, w)",
    )
}

fn rule_size() -> Rule {
    Rule::new(format!("self.matches('{SIZE_PATTERN}')"))
        .message("must be a byte count or a number with a unit, such as 64Mi, 64MiB, 256MB or 2Gi")
}

fn rule_one_default_policy() -> Rule {
    Rule::new(
        "self.retentionPolicies.size() == 0 || self.retentionPolicies.exists_one(p, p.default)",
    )
    .message(
        "exactly one retention policy of a database must have default: true \
             (or list none to get 'autogen', infinite and default)",
    )
}

fn rule_scaling_bounds() -> Rule {
    Rule::new("self.minReplicas <= self.maxReplicas")
        .message("scaling.minReplicas must be less than or equal to scaling.maxReplicas")
}

fn rule_autoscaling_needs_bounds() -> Rule {
    Rule::new("!self.autoscaling.enabled || has(self.scaling)")
        .message("autoscaling.enabled needs scaling.minReplicas and scaling.maxReplicas")
}

fn rule_storage_class_immutable() -> Rule {
    Rule::new(
        "has(self.storageClassName) == has(oldSelf.storageClassName) && \
         (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
    )
    .message(
        "storage.storageClassName is immutable: a StatefulSet cannot change its volume claim \
         templates (create a new tenant and move the data)",
    )
}

fn rule_cluster_tag_immutable() -> Rule {
    Rule::new(
        "has(self.clusterTag) == has(oldSelf.clusterTag) && \
         (!has(self.clusterTag) || self.clusterTag == oldSelf.clusterTag)",
    )
    .message(
        "series.clusterTag is immutable: the pods' data holds series ids made under it \
         (create a new tenant to change it)",
    )
}

fn rule_storage_size_immutable() -> Rule {
    Rule::new("self.size == oldSelf.size").message(
        "storage.size is immutable: a StatefulSet cannot change its volume claim templates \
         (expand the PersistentVolumeClaims directly if the storage class allows it)",
    )
}

fn rule_quantity() -> Rule {
    Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("must be a positive Kubernetes quantity such as 10Gi or 500M")
}

fn rule_tenant_name() -> Rule {
    Rule::new(format!(
        "self.metadata.name.size() <= {MAX_TENANT_NAME_LEN} && self.metadata.name.matches('{TENANT_NAME_PATTERN}')"
    ))
    .message(
        "metadata.name must be a DNS-1035 label (lower-case letters, digits and '-', starting \
         with a letter) of at most 52 characters: it names the StatefulSet, its pods and Services",
    )
}

/// One tenant of sluice: a StatefulSet of `sluice-server` pods with its configuration,
/// Services, disruption budget and storage.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "IngestTenant",
    plural = "ingesttenants",
    singular = "ingesttenant",
    shortname = "it",
    category = "sluice",
    namespaced,
    status = "IngestTenantStatus",
    derive = "PartialEq",
    doc = "An InfluxDB-compatible ingest tenant served by a StatefulSet of sluice-server pods.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas","description":"Desired replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas","description":"Replicas passing /ready"}"#,
    printcolumn = r#"{"name":"Knee","type":"number","jsonPath":".status.knee.pointsPerSecond","description":"Measured latency knee, points/s per replica"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    validation = rule_tenant_name(),
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_autoscaling_needs_bounds())]
pub struct IngestTenantSpec {
    /// The sluice-server image, e.g. `registry.example.com/sluice-server:0.1.0`.
    #[serde(default = "default_image")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,

    /// When the kubelet pulls the image.
    #[serde(default)]
    pub image_pull_policy: PullPolicy,

    /// Desired number of server pods. The `/scale` subresource (`kubectl scale`, an HPA) and,
    /// later, the latency-knee autoscaler write this field. Clamped into `scaling` when set.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 100))]
    pub replicas: i32,

    /// Bounds for `replicas`; required when autoscaling is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<ScalingSpec>,

    /// Latency-knee autoscaling: the operator adds replicas when the pods fall behind or the
    /// offered rate needs more pods at their measured knee, and removes them slowly (each
    /// through decommissioning, which hands its data to the pods that stay).
    #[serde(default)]
    pub autoscaling: AutoscalingSpec,

    /// Databases that exist from the start, with their retention policies.
    #[serde(default)]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub databases: Vec<DatabaseSpec>,

    /// Create a database on its first write (as InfluxDB does) when it is not listed above.
    #[serde(default = "default_true")]
    pub auto_create_databases: bool,

    /// chDB connection pool and flush settings.
    #[serde(default)]
    pub pool: PoolSpec,

    /// The volume holding each pod's write-ahead log and chDB data.
    #[serde(default)]
    pub storage: StorageSpec,

    /// How series ids are made: fixed when the tenant is created.
    #[serde(default)]
    pub series: SeriesSpec,

    /// Request, schema and cardinality limits.
    #[serde(default)]
    pub limits: LimitsSpec,

    /// Limits of every `/sql` and `/query` statement.
    #[serde(default)]
    pub query: QuerySpec,

    /// Token authentication; omitted means the server accepts unauthenticated writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,

    /// CPU and memory requests and limits of the server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Where the pods may run.
    #[serde(default)]
    pub scheduling: SchedulingSpec,

    /// How long a stopping pod may take to drain requests and flush its WAL into chDB. The
    /// server is told to give up 10 seconds earlier, so that it exits before the kubelet kills
    /// it; whatever is left stays in the WAL and is flushed on the next start.
    #[serde(default = "default_grace")]
    #[schemars(range(min = 15, max = 3600))]
    pub termination_grace_period_seconds: i64,
}

/// Image pull policy of the server container.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PullPolicy {
    Always,
    #[default]
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// Replica bounds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_scaling_bounds())]
pub struct ScalingSpec {
    #[schemars(range(min = 0, max = 100))]
    pub min_replicas: i32,
    #[schemars(range(min = 1, max = 100))]
    pub max_replicas: i32,
}

/// A database and its retention policies.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_one_default_policy())]
pub struct DatabaseSpec {
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = rule_name())]
    pub name: String,
    /// Retention policies; none means one policy, `autogen`, infinite and default.
    #[serde(default)]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub retention_policies: Vec<RetentionPolicySpec>,
}

/// A retention policy: how long the points written to it are kept.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicySpec {
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = rule_name())]
    pub name: String,
    /// `inf` keeps points forever; otherwise e.g. `30d`, `12h`, `1h30m`.
    #[serde(default = "default_inf")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_retention_duration())]
    pub duration: String,
    /// The policy used by writes that name none (exactly one per database).
    #[serde(default)]
    pub default: bool,
}

/// chDB connections and the WAL-to-chDB flush.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// chDB connections for queries (`/sql`).
    #[serde(default = "default_pool_connections")]
    #[schemars(range(min = 1, max = 64))]
    pub connections: i32,
    /// Threads moving committed WAL ranges into chDB (each with its own connection).
    #[serde(default = "default_pool_flush_workers")]
    #[schemars(range(min = 1, max = 64))]
    pub flush_workers: i32,
    /// Upper bound on rows per chDB insert.
    #[serde(default = "default_pool_max_points_per_batch")]
    #[schemars(range(min = 1, max = 10_000_000))]
    pub max_points_per_batch: i32,
    /// A table's pending points are flushed at least this often.
    #[serde(default = "default_pool_flush_interval")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_duration())]
    pub flush_interval: String,
}

impl Default for PoolSpec {
    fn default() -> Self {
        Self {
            connections: default_pool_connections(),
            flush_workers: default_pool_flush_workers(),
            max_points_per_batch: default_pool_max_points_per_batch(),
            flush_interval: default_pool_flush_interval(),
        }
    }
}

// The defaults are the server's own (`sluice_core::config`), so a tenant that says nothing
// runs exactly what a bare `sluice-server` would.
fn default_pool_connections() -> i32 {
    i32::try_from(PoolConfig::default().connections).unwrap_or(i32::MAX)
}
fn default_pool_flush_workers() -> i32 {
    i32::try_from(PoolConfig::default().flush_workers).unwrap_or(i32::MAX)
}
fn default_pool_max_points_per_batch() -> i32 {
    i32::try_from(PoolConfig::default().max_points_per_batch).unwrap_or(i32::MAX)
}
fn default_pool_flush_interval() -> String {
    format_duration(PoolConfig::default().flush_interval)
}

/// How series ids are made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_cluster_tag_immutable())]
pub struct SeriesSpec {
    /// A tag key (for example `region`) whose value gives each series id its top 16 bits, so
    /// that the series sharing a value lie together in every table and a read filtered on one
    /// value opens only their part of it. Pick the tag dashboards filter on most that has few
    /// values; series without it keep plain ids. Immutable: under another rule the same series
    /// would get a second id (the pods refuse to start on data written under another rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub cluster_tag: Option<String>,
}

/// Per-pod storage for the WAL and chDB data.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rule_storage_class_immutable(), validation = rule_storage_size_immutable())]
pub struct StorageSpec {
    /// StorageClass of the volumes; omitted uses the cluster's default class. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
    /// Size of each pod's volume (a Kubernetes quantity). Immutable.
    #[serde(default = "default_storage_size")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_quantity())]
    pub size: String,
    /// What happens to the volumes when the tenant is deleted: `Retain` (the default) keeps
    /// them, so re-creating the tenant finds its data; `Delete` deletes them.
    #[serde(default)]
    pub reclaim_policy: ReclaimPolicy,
    /// What happens to the volume of a pod removed by a scale-down, which handed all its data
    /// over first and is empty: `Retain` (the default) keeps it for a later scale-up; `Delete`
    /// deletes it. A scale to zero keeps every volume whatever this says, since nothing is
    /// handed over then.
    #[serde(default)]
    pub scale_down_policy: ReclaimPolicy,
}

impl Default for StorageSpec {
    fn default() -> Self {
        Self {
            storage_class_name: None,
            size: default_storage_size(),
            reclaim_policy: ReclaimPolicy::Retain,
            scale_down_policy: ReclaimPolicy::Retain,
        }
    }
}

/// Fate of volumes when the tenant is deleted, or a pod removed by a scale-down.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum ReclaimPolicy {
    #[default]
    Retain,
    Delete,
}

impl ReclaimPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ReclaimPolicy::Retain => "Retain",
            ReclaimPolicy::Delete => "Delete",
        }
    }
}

/// Token authentication.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// A Secret in the tenant's namespace holding the accepted tokens, one per line.
    pub token_secret_ref: SecretKeyRef,
}

/// A key of a Secret in the tenant's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the tokens.
    #[serde(default = "default_token_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// Pod placement. Without `affinity`, pods of a tenant prefer different nodes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Replaces the default preferred pod anti-affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

fn default_image() -> String {
    DEFAULT_IMAGE.into()
}
fn default_replicas() -> i32 {
    1
}
fn default_true() -> bool {
    true
}
fn default_grace() -> i64 {
    120
}
fn default_inf() -> String {
    "inf".into()
}
fn default_storage_size() -> String {
    "10Gi".into()
}
fn default_token_key() -> String {
    "tokens".into()
}

/// The CustomResourceDefinition, as `crdgen` prints it and the tests install it.
pub fn crd() -> CustomResourceDefinition {
    IngestTenant::crd()
}

/// The CRD as YAML, exactly as committed in `crds/ingesttenant.yaml`.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    let body = serde_yaml::to_string(&crd())?;
    Ok(format!(
        "# Generated by `cargo run -p sluice-operator --bin crdgen`; do not edit by hand.\n{body}"
    ))
}

impl IngestTenantSpec {
    /// A spec with every default, as the API server would fill it in.
    pub fn defaults() -> Self {
        Self {
            image: default_image(),
            image_pull_policy: PullPolicy::default(),
            replicas: default_replicas(),
            scaling: None,
            autoscaling: AutoscalingSpec::default(),
            databases: Vec::new(),
            auto_create_databases: true,
            pool: PoolSpec::default(),
            storage: StorageSpec::default(),
            series: SeriesSpec::default(),
            limits: LimitsSpec::default(),
            query: QuerySpec::default(),
            auth: None,
            resources: None,
            scheduling: SchedulingSpec::default(),
            termination_grace_period_seconds: default_grace(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crds/ingesttenant.yaml` is what users apply; it must be exactly what the types say.
    /// Regenerate with `cargo run -p sluice-operator --bin crdgen > crds/ingesttenant.yaml`.
    #[test]
    fn crd_yaml_is_up_to_date() {
        // The directory cargo runs the test from, not the one it was compiled in: a target
        // directory shared between checkouts may hold a binary built in another (deleted) one.
        let dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        let path = format!("{dir}/../crds/ingesttenant.yaml");
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let generated = crd_yaml().unwrap();
        assert!(
            committed == generated,
            "{path} is stale: run `cargo run -p sluice-operator --bin crdgen > crds/ingesttenant.yaml`"
        );
    }

    #[test]
    fn crd_has_scale_status_short_name_and_columns() {
        let crd = crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("ingesttenants.sluice.dev")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["it".to_string()]));
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1alpha1");
        let sub = v.subresources.as_ref().unwrap();
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );
        let cols: Vec<_> = v
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["Replicas", "Ready", "Knee", "Phase", "Age"]);
    }

    /// The API server refuses non-structural schemas (`anyOf` with types, missing types).
    #[test]
    fn schema_is_structural_enough() {
        let json = serde_json::to_value(crd()).unwrap();
        fn walk(v: &serde_json::Value, path: &str, bad: &mut Vec<String>) {
            if let Some(o) = v.as_object() {
                for key in ["anyOf", "oneOf", "allOf"] {
                    if let Some(branches) = o.get(key).and_then(|b| b.as_array()) {
                        for b in branches {
                            if b.get("type").is_some() || b.get("nullable").is_some() {
                                bad.push(format!("{path}/{key}"));
                            }
                        }
                    }
                }
                for (k, c) in o {
                    walk(c, &format!("{path}/{k}"), bad);
                }
            } else if let Some(a) = v.as_array() {
                for c in a {
                    walk(c, path, bad);
                }
            }
        }
        let mut bad = Vec::new();
        walk(&json, "", &mut bad);
        assert!(bad.is_empty(), "non-structural: {bad:?}");
    }

    #[test]
    fn defaults_deserialize_from_an_empty_spec() {
        let spec: IngestTenantSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec, IngestTenantSpec::defaults());
        assert_eq!(spec.pool.flush_interval, "1s");
        assert_eq!(spec.limits.max_body_bytes, "64MiB");
        let spec: IngestTenantSpec =
            serde_json::from_str(r#"{"pool":{"flushWorkers":3},"replicas":2}"#).unwrap();
        assert_eq!(spec.pool.flush_workers, 3);
        assert_eq!(spec.pool.connections, 2);
        assert_eq!(spec.replicas, 2);
    }
}
