//! Stage 1 of a reconcile: turn an `IngestTenant` into a [`ValidTenant`], or say precisely why
//! not.
//!
//! The CRD schema refuses almost every bad spec before it is stored. This stage runs anyway,
//! because (a) the server's own rules live in `sluice_core::config::ServerConfig::validate`, and
//! running them here guarantees the operator never renders a ConfigMap the server would refuse
//! (a crash-looping pod is a far worse way to learn about a typo), and (b) objects stored under
//! an older, laxer CRD must produce a Degraded condition, not a panic.

use std::time::Duration;

use kube::ResourceExt;
use sluice_core::config::{
    parse_duration, AuthConfig, ByteSize, ClusterConfig, DatabaseConfig, LimitsConfig, PoolConfig,
    QueryConfig, RetentionDuration, RetentionPolicyConfig, SeriesConfig, ServerConfig,
};

use crate::crd::{IngestTenant, IngestTenantSpec, MAX_TENANT_NAME_LEN};

/// Where the pods find their configuration, data and tokens. Fixed paths: they are part of the
/// contract between the operator's StatefulSet and the config it renders.
pub const CONFIG_DIR: &str = "/etc/sluice";
pub const CONFIG_FILE: &str = "sluice.toml";
pub const DATA_DIR: &str = "/var/lib/sluice";
pub const TOKENS_DIR: &str = "/etc/sluice/auth";
pub const TOKENS_FILE: &str = "tokens";
pub const HTTP_PORT: i32 = 8086;
/// The tenant's peer list (a ConfigMap the server reads again when it changes).
pub const PEERS_DIR: &str = "/etc/sluice/peers";
pub const PEERS_FILE: &str = "peers";
/// The token the tenant's pods present to each other (a Secret the operator creates).
pub const CLUSTER_DIR: &str = "/etc/sluice/cluster";
pub const CLUSTER_TOKEN_FILE: &str = "token";

/// Why a spec cannot be reconciled. The message is shown in the Degraded condition and the
/// Warning event, so it names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "metadata.name {0:?} must be a DNS-1035 label of at most {MAX_TENANT_NAME_LEN} characters"
    )]
    BadTenantName(String),
    #[error("the tenant has no namespace or uid (not read from the API server?)")]
    MissingMetadata,
    #[error("spec.image must not be empty")]
    EmptyImage,
    #[error("spec.scaling: minReplicas ({min}) must not exceed maxReplicas ({max})")]
    ScalingBounds { min: i32, max: i32 },
    #[error("{field}: {message}")]
    Field { field: String, message: String },
    #[error("server configuration: {0}")]
    Config(String),
}

fn field(field: impl Into<String>, message: impl std::fmt::Display) -> SpecError {
    SpecError::Field {
        field: field.into(),
        message: message.to_string(),
    }
}

/// A tenant whose spec passed every check, with everything the builders need precomputed.
/// Builders are pure functions of this value.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidTenant {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub generation: Option<i64>,
    pub spec: IngestTenantSpec,
    /// The server configuration the pods run with (validated by core's own rules).
    pub config: ServerConfig,
    /// `config` rendered as TOML, byte for byte what the ConfigMap holds.
    pub config_toml: String,
    /// Hash of `config_toml`; a change rolls the pods.
    pub config_hash: String,
    /// `spec.replicas` clamped into `spec.scaling`.
    pub replicas: i32,
    /// Set when `spec.replicas` was outside `spec.scaling` and got clamped.
    pub clamped_from: Option<i32>,
}

/// Checks the tenant and renders its server configuration.
pub fn validate(tenant: &IngestTenant) -> Result<ValidTenant, SpecError> {
    let name = tenant.name_any();
    if name.is_empty() || name.len() > MAX_TENANT_NAME_LEN || !is_dns1035_label(&name) {
        return Err(SpecError::BadTenantName(name));
    }
    let namespace = tenant.namespace().ok_or(SpecError::MissingMetadata)?;
    let uid = tenant.uid().ok_or(SpecError::MissingMetadata)?;
    let spec = &tenant.spec;
    if spec.image.trim().is_empty() {
        return Err(SpecError::EmptyImage);
    }
    let (replicas, clamped_from) = effective_replicas(spec)?;
    if spec.termination_grace_period_seconds < 15 {
        return Err(field(
            "spec.terminationGracePeriodSeconds",
            "must be at least 15",
        ));
    }
    for (value, path) in [
        (&spec.autoscaling.p95_target, "spec.autoscaling.p95Target"),
        (
            &spec.autoscaling.scale_down_window,
            "spec.autoscaling.scaleDownWindow",
        ),
        (
            &spec.autoscaling.scale_down_cooldown,
            "spec.autoscaling.scaleDownCooldown",
        ),
    ] {
        parse_duration(value).map_err(|e| field(path, e))?;
    }
    if spec.storage.size.trim().is_empty() {
        return Err(field("spec.storage.size", "must not be empty"));
    }
    if let Some(auth) = &spec.auth {
        if auth.token_secret_ref.name.is_empty() || auth.token_secret_ref.key.is_empty() {
            return Err(field(
                "spec.auth.tokenSecretRef",
                "name and key must not be empty",
            ));
        }
    }
    let config = server_config(spec)?;
    let config_toml = render_config(&config)?;
    let config_hash = config_hash(&config_toml);
    Ok(ValidTenant {
        name,
        namespace,
        uid,
        generation: tenant.metadata.generation,
        spec: spec.clone(),
        config,
        config_toml,
        config_hash,
        replicas,
        clamped_from,
    })
}

/// `spec.replicas` clamped into `spec.scaling`, and the original value when it was clamped.
pub fn effective_replicas(spec: &IngestTenantSpec) -> Result<(i32, Option<i32>), SpecError> {
    if spec.replicas < 0 {
        return Err(field("spec.replicas", "must not be negative"));
    }
    match &spec.scaling {
        None => Ok((spec.replicas, None)),
        Some(s) => {
            if s.min_replicas < 0 || s.min_replicas > s.max_replicas {
                return Err(SpecError::ScalingBounds {
                    min: s.min_replicas,
                    max: s.max_replicas,
                });
            }
            let r = spec.replicas.clamp(s.min_replicas, s.max_replicas);
            Ok((r, (r != spec.replicas).then_some(spec.replicas)))
        }
    }
}

fn positive_duration(path: &str, v: &str) -> Result<Duration, SpecError> {
    let d = parse_duration(v).map_err(|e| field(path, e))?;
    if d.is_zero() {
        return Err(field(path, "must be longer than zero"));
    }
    Ok(d)
}

fn positive_u32(path: &str, v: i32) -> Result<u32, SpecError> {
    u32::try_from(v)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| field(path, "must be at least 1"))
}

/// The server configuration of a tenant's pods. The listen address, data directory and tokens
/// file are fixed by the pod layout; everything else comes from the spec.
pub fn server_config(spec: &IngestTenantSpec) -> Result<ServerConfig, SpecError> {
    let mut databases = Vec::with_capacity(spec.databases.len());
    for (i, db) in spec.databases.iter().enumerate() {
        let mut retention_policies = Vec::with_capacity(db.retention_policies.len());
        for (j, rp) in db.retention_policies.iter().enumerate() {
            let duration: RetentionDuration = rp.duration.parse().map_err(|e| {
                field(
                    format!("spec.databases[{i}].retentionPolicies[{j}].duration"),
                    e,
                )
            })?;
            retention_policies.push(RetentionPolicyConfig {
                name: rp.name.clone(),
                duration,
                default: rp.default,
            });
        }
        databases.push(DatabaseConfig {
            name: db.name.clone(),
            retention_policies,
        });
    }
    let p = &spec.pool;
    let flush_interval: Duration =
        parse_duration(&p.flush_interval).map_err(|e| field("spec.pool.flushInterval", e))?;
    if flush_interval.is_zero() {
        return Err(field("spec.pool.flushInterval", "must be longer than zero"));
    }
    let pool = PoolConfig {
        connections: positive_u32("spec.pool.connections", p.connections)?,
        flush_workers: positive_u32("spec.pool.flushWorkers", p.flush_workers)?,
        max_points_per_batch: positive_u32("spec.pool.maxPointsPerBatch", p.max_points_per_batch)?,
        flush_interval,
    };
    let l = &spec.limits;
    let size = |path: &str, v: &str| -> Result<ByteSize, SpecError> {
        v.parse::<ByteSize>().map_err(|e| field(path, e))
    };
    let limits = LimitsConfig {
        max_body_bytes: size("spec.limits.maxBodyBytes", &l.max_body_bytes)?,
        max_decompressed_bytes: size(
            "spec.limits.maxDecompressedBytes",
            &l.max_decompressed_bytes,
        )?,
        max_series: u64::try_from(l.max_series)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| field("spec.limits.maxSeries", "must be at least 1"))?,
        wal_queue_depth: positive_u32("spec.limits.walQueueDepth", l.wal_queue_depth)?,
        max_wal_backlog_bytes: size("spec.limits.maxWalBacklogBytes", &l.max_wal_backlog_bytes)?,
        max_wal_disk_bytes: wal_disk_bound(
            size("spec.limits.maxWalDiskBytes", &l.max_wal_disk_bytes)?,
            &spec.storage.size,
        ),
        min_free_disk_bytes: size("spec.limits.minFreeDiskBytes", &l.min_free_disk_bytes)?,
        wal_memtable_bytes: size("spec.limits.walMemtableBytes", &l.wal_memtable_bytes)?,
        pretouch_bytes: size("spec.limits.pretouchBytes", &l.pretouch_bytes)?,
        max_fields_per_measurement: positive_u32(
            "spec.limits.maxFieldsPerMeasurement",
            l.max_fields_per_measurement,
        )?,
        max_measurements_per_database: positive_u32(
            "spec.limits.maxMeasurementsPerDatabase",
            l.max_measurements_per_database,
        )?,
        max_databases: positive_u32("spec.limits.maxDatabases", l.max_databases)?,
        max_tags_per_series: positive_u32("spec.limits.maxTagsPerSeries", l.max_tags_per_series)?,
        max_new_series_per_request: positive_u32(
            "spec.limits.maxNewSeriesPerRequest",
            l.max_new_series_per_request,
        )?,
        max_requests_in_flight: positive_u32(
            "spec.limits.maxRequestsInFlight",
            l.max_requests_in_flight,
        )?,
        request_memory_bytes: size("spec.limits.requestMemoryBytes", &l.request_memory_bytes)?,
        body_read_timeout: positive_duration("spec.limits.bodyReadTimeout", &l.body_read_timeout)?,
        // A pod's budget is its memory limit (spec.resources), which the server reads itself.
        memory_bytes: ByteSize(0),
    };
    let q = &spec.query;
    let query = QueryConfig {
        timeout: positive_duration("spec.query.timeout", &q.timeout)?,
        max_memory_bytes: size("spec.query.maxMemoryBytes", &q.max_memory_bytes)?,
        max_rows_to_read: u64::try_from(q.max_rows_to_read)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| field("spec.query.maxRowsToRead", "must be at least 1"))?,
        max_result_bytes: size("spec.query.maxResultBytes", &q.max_result_bytes)?,
        queue_timeout: parse_duration(&q.queue_timeout)
            .map_err(|e| field("spec.query.queueTimeout", e))?,
    };
    let auth = AuthConfig {
        tokens: Vec::new(),
        tokens_file: spec
            .auth
            .as_ref()
            .map(|_| format!("{TOKENS_DIR}/{TOKENS_FILE}")),
    };
    let mut cfg = ServerConfig {
        listen: format!("0.0.0.0:{HTTP_PORT}"),
        data_dir: DATA_DIR.into(),
        auto_create_databases: spec.auto_create_databases,
        databases,
        pool,
        limits,
        query,
        auth,
        cluster: ClusterConfig {
            peers_file: Some(format!("{PEERS_DIR}/{PEERS_FILE}")),
            token_file: Some(format!("{CLUSTER_DIR}/{CLUSTER_TOKEN_FILE}")),
            ..Default::default()
        },
        series: SeriesConfig {
            cluster_tag: spec.series.cluster_tag.clone(),
        },
    };
    cfg.validate()
        .map_err(|e| SpecError::Config(e.to_string()))?;
    Ok(cfg)
}

/// Renders the configuration as the TOML file the server reads. The output is deterministic
/// (field order is the struct's), which the config hash relies on.
pub fn render_config(cfg: &ServerConfig) -> Result<String, SpecError> {
    let body = toml::to_string(cfg).map_err(|e| SpecError::Config(e.to_string()))?;
    Ok(format!(
        "# Rendered by sluice-operator from the IngestTenant spec; edits are overwritten.\n{body}"
    ))
}

/// A stable hash of the rendered configuration (XXH3-64, hex): the same bytes give the same
/// hash in every operator version, so upgrading the operator does not roll pods.
pub fn config_hash(rendered: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(rendered.as_bytes()))
}

fn is_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[b.len() - 1] != b'-'
}

/// The WAL shares the pod's volume with chDB's tables: it may take at most half of it, whatever
/// `spec.limits.maxWalDiskBytes` says (a volume size in a unit the server's sizes do not know,
/// such as `1e10`, leaves the limit as set).
fn wal_disk_bound(limit: ByteSize, volume: &str) -> ByteSize {
    match volume.trim().parse::<ByteSize>() {
        Ok(v) if v.0 / 2 < limit.0 => ByteSize(v.0 / 2),
        _ => limit,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_wal_takes_at_most_half_the_volume() {
        let g = ByteSize(8 << 30);
        assert_eq!(wal_disk_bound(g, "10Gi"), ByteSize(5 << 30));
        assert_eq!(wal_disk_bound(g, "100Gi"), g);
        assert_eq!(wal_disk_bound(g, "1e10"), g);
    }
    use super::*;
    use crate::crd::{AuthSpec, DatabaseSpec, RetentionPolicySpec, ScalingSpec, SecretKeyRef};
    use kube::api::ObjectMeta;

    pub(crate) fn tenant(name: &str, spec: IngestTenantSpec) -> IngestTenant {
        let mut t = IngestTenant::new(name, spec);
        t.metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            generation: Some(1),
            ..Default::default()
        };
        t
    }

    fn telegraf() -> DatabaseSpec {
        DatabaseSpec {
            name: "telegraf".into(),
            retention_policies: vec![
                RetentionPolicySpec {
                    name: "autogen".into(),
                    duration: "30d".into(),
                    default: true,
                },
                RetentionPolicySpec {
                    name: "raw".into(),
                    duration: "7d".into(),
                    default: false,
                },
            ],
        }
    }

    #[test]
    fn defaults_render_the_servers_own_defaults() {
        let v = validate(&tenant("acme", IngestTenantSpec::defaults())).unwrap();
        assert_eq!(v.config.pool, PoolConfig::default());
        // ...but for the WAL's share of the default 10Gi volume.
        let limits = LimitsConfig {
            max_wal_disk_bytes: ByteSize(5 << 30),
            ..LimitsConfig::default()
        };
        assert_eq!(v.config.limits, limits);
        assert_eq!(v.config.listen, "0.0.0.0:8086");
        assert_eq!(v.config.data_dir, DATA_DIR);
        assert!(v.config.auth.tokens_file.is_none());
        assert_eq!(v.replicas, 1);
    }

    #[test]
    fn rendered_toml_reads_back_as_the_same_config() {
        let mut spec = IngestTenantSpec::defaults();
        spec.databases = vec![telegraf()];
        spec.pool.flush_workers = 3;
        spec.pool.flush_interval = "250ms".into();
        spec.limits.max_body_bytes = "1Mi".into();
        spec.limits.max_fields_per_measurement = 50;
        spec.query.timeout = "5s".into();
        spec.auth = Some(AuthSpec {
            token_secret_ref: SecretKeyRef {
                name: "t".into(),
                key: "tokens".into(),
            },
        });
        let v = validate(&tenant("acme", spec)).unwrap();
        let body = v.config_toml.clone();
        let mut back: ServerConfig = toml::from_str(&body).unwrap();
        back.validate().unwrap();
        assert_eq!(back, v.config);
        assert_eq!(back.pool.flush_workers, 3);
        assert_eq!(back.pool.flush_interval, Duration::from_millis(250));
        assert_eq!(back.limits.max_body_bytes, ByteSize(1 << 20));
        assert_eq!(back.limits.max_fields_per_measurement, 50);
        assert_eq!(back.query.timeout, Duration::from_secs(5));
        assert_eq!(
            back.auth.tokens_file.as_deref(),
            Some("/etc/sluice/auth/tokens")
        );
        assert_eq!(back.databases[0].retention_policies.len(), 2);
        assert!(body.contains("flush_workers = 3"), "{body}");
    }

    #[test]
    fn a_cluster_tag_reaches_the_server_and_its_absence_changes_no_byte() {
        let plain = validate(&tenant("acme", IngestTenantSpec::defaults())).unwrap();
        assert!(
            !plain.config_toml.contains("[series]"),
            "{}",
            plain.config_toml
        );
        let mut spec = IngestTenantSpec::defaults();
        spec.series.cluster_tag = Some("region".into());
        let v = validate(&tenant("acme", spec)).unwrap();
        assert!(
            v.config_toml.contains("[series]\ncluster_tag = \"region\""),
            "{}",
            v.config_toml
        );
        let mut back: ServerConfig = toml::from_str(&v.config_toml).unwrap();
        back.validate().unwrap();
        assert_eq!(back, v.config);
        assert_ne!(plain.config_hash, v.config_hash);
        let mut spec = IngestTenantSpec::defaults();
        spec.series.cluster_tag = Some("time".into());
        assert!(validate(&tenant("acme", spec)).is_err());
    }

    #[test]
    fn hash_is_stable_and_follows_the_config() {
        let a = validate(&tenant("acme", IngestTenantSpec::defaults())).unwrap();
        let b = validate(&tenant("acme", IngestTenantSpec::defaults())).unwrap();
        assert_eq!(a.config_hash, b.config_hash);
        assert_eq!(a.config_hash.len(), 16);
        let mut spec = IngestTenantSpec::defaults();
        spec.pool.connections = 4;
        let c = validate(&tenant("acme", spec)).unwrap();
        assert_ne!(a.config_hash, c.config_hash);
        // Fields that do not reach the server do not change the hash (no needless rolls).
        let mut spec = IngestTenantSpec::defaults();
        spec.replicas = 5;
        spec.image = "other:1".into();
        let d = validate(&tenant("acme", spec)).unwrap();
        assert_eq!(a.config_hash, d.config_hash);
    }

    #[test]
    fn replicas_are_clamped_into_the_bounds() {
        let mut spec = IngestTenantSpec::defaults();
        spec.replicas = 12;
        spec.scaling = Some(ScalingSpec {
            min_replicas: 2,
            max_replicas: 8,
        });
        assert_eq!(effective_replicas(&spec).unwrap(), (8, Some(12)));
        spec.replicas = 1;
        assert_eq!(effective_replicas(&spec).unwrap(), (2, Some(1)));
        spec.replicas = 4;
        assert_eq!(effective_replicas(&spec).unwrap(), (4, None));
        spec.scaling = Some(ScalingSpec {
            min_replicas: 5,
            max_replicas: 3,
        });
        assert_eq!(
            effective_replicas(&spec).unwrap_err(),
            SpecError::ScalingBounds { min: 5, max: 3 }
        );
    }

    #[test]
    fn bad_specs_name_the_field() {
        type Mutation = Box<dyn Fn(&mut IngestTenantSpec)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (
                Box::new(|s| {
                    let mut db = telegraf();
                    db.retention_policies[1].default = true;
                    s.databases = vec![db];
                }),
                "exactly one retention policy",
            ),
            (
                Box::new(|s| {
                    let mut db = telegraf();
                    db.name = "bad name".into();
                    s.databases = vec![db];
                }),
                "bad name",
            ),
            (
                Box::new(|s| {
                    let mut db = telegraf();
                    db.retention_policies[0].duration = "30 days".into();
                    s.databases = vec![db];
                }),
                "spec.databases[0].retentionPolicies[0].duration",
            ),
            (
                Box::new(|s| s.pool.flush_interval = "soon".into()),
                "spec.pool.flushInterval",
            ),
            (
                Box::new(|s| s.pool.flush_interval = "0s".into()),
                "spec.pool.flushInterval",
            ),
            (
                Box::new(|s| s.pool.connections = 0),
                "spec.pool.connections",
            ),
            (
                Box::new(|s| s.limits.max_body_bytes = "lots".into()),
                "spec.limits.maxBodyBytes",
            ),
            (
                Box::new(|s| s.limits.max_series = -1),
                "spec.limits.maxSeries",
            ),
            (
                Box::new(|s| s.autoscaling.p95_target = "fast".into()),
                "spec.autoscaling.p95Target",
            ),
            (
                Box::new(|s| s.autoscaling.scale_down_window = "soon".into()),
                "spec.autoscaling.scaleDownWindow",
            ),
            (Box::new(|s| s.image = " ".into()), "spec.image"),
            (Box::new(|s| s.replicas = -1), "spec.replicas"),
        ];
        for (mutate, want) in cases {
            let mut spec = IngestTenantSpec::defaults();
            mutate(&mut spec);
            let err = validate(&tenant("acme", spec)).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }

    #[test]
    fn tenant_names_must_fit_kubernetes_names() {
        let spec = IngestTenantSpec::defaults();
        for bad in ["Acme", "1acme", "acme-", &"a".repeat(53)] {
            assert!(
                matches!(
                    validate(&tenant(bad, spec.clone())),
                    Err(SpecError::BadTenantName(_))
                ),
                "{bad}"
            );
        }
        assert!(validate(&tenant(&"a".repeat(52), spec)).is_ok());
    }
}
