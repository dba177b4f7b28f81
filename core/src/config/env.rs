//! Every configuration key as an environment variable `SLUICE_<KEY>`, over the file.

use super::{parse_duration, ConfigError, DatabaseConfig, RetentionPolicyConfig, ServerConfig};

/// The environment variables [`apply_env`] reads, with the key each one sets. Listed once so
/// the README, the server's `--help` and the code cannot disagree.
pub const ENV_KEYS: &[(&str, &str)] = &[
    ("SLUICE_LISTEN", "listen"),
    ("SLUICE_DATA_DIR", "data_dir"),
    ("SLUICE_AUTO_CREATE_DATABASES", "auto_create_databases"),
    (
        "SLUICE_DATABASES",
        "databases, as `db[:rp=duration[*],...];...` (`*` marks the default policy)",
    ),
    ("SLUICE_POOL_CONNECTIONS", "pool.connections"),
    ("SLUICE_POOL_FLUSH_WORKERS", "pool.flush_workers"),
    (
        "SLUICE_POOL_MAX_POINTS_PER_BATCH",
        "pool.max_points_per_batch",
    ),
    ("SLUICE_POOL_FLUSH_INTERVAL", "pool.flush_interval"),
    ("SLUICE_LIMITS_MAX_BODY_BYTES", "limits.max_body_bytes"),
    (
        "SLUICE_LIMITS_MAX_DECOMPRESSED_BYTES",
        "limits.max_decompressed_bytes",
    ),
    ("SLUICE_LIMITS_MAX_SERIES", "limits.max_series"),
    ("SLUICE_LIMITS_WAL_QUEUE_DEPTH", "limits.wal_queue_depth"),
    (
        "SLUICE_LIMITS_MAX_WAL_BACKLOG_BYTES",
        "limits.max_wal_backlog_bytes",
    ),
    (
        "SLUICE_LIMITS_MAX_WAL_DISK_BYTES",
        "limits.max_wal_disk_bytes",
    ),
    (
        "SLUICE_LIMITS_MIN_FREE_DISK_BYTES",
        "limits.min_free_disk_bytes",
    ),
    (
        "SLUICE_LIMITS_WAL_MEMTABLE_BYTES",
        "limits.wal_memtable_bytes",
    ),
    ("SLUICE_LIMITS_PRETOUCH_BYTES", "limits.pretouch_bytes"),
    ("SLUICE_AUTH_TOKENS", "auth.tokens (comma-separated)"),
    ("SLUICE_AUTH_TOKENS_FILE", "auth.tokens_file"),
    (
        "SLUICE_CLUSTER_PEERS",
        "cluster.peers (comma-separated host:port)",
    ),
    ("SLUICE_CLUSTER_PEERS_FILE", "cluster.peers_file"),
    ("SLUICE_CLUSTER_TOKEN", "cluster.token"),
    ("SLUICE_CLUSTER_TOKEN_FILE", "cluster.token_file"),
    ("SLUICE_CLUSTER_CONNECT_TIMEOUT", "cluster.connect_timeout"),
    ("SLUICE_CLUSTER_RECEIVE_TIMEOUT", "cluster.receive_timeout"),
    (
        "SLUICE_CLUSTER_HANDOFF_CHUNK_ROWS",
        "cluster.handoff_chunk_rows",
    ),
    ("SLUICE_SERIES_CLUSTER_TAG", "series.cluster_tag"),
];

/// Overrides configuration keys from `SLUICE_*` variables. Takes the variables as an iterator
/// so that tests need not touch the process environment. Returns the `SLUICE_*` names it did
/// not recognise, for the caller to warn about (a typo should be visible, not fatal).
pub fn apply_env<I, K, V>(cfg: &mut ServerConfig, vars: I) -> Result<Vec<String>, ConfigError>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    fn num<T: std::str::FromStr>(var: &str, v: &str) -> Result<T, ConfigError> {
        v.trim().parse().map_err(|_| ConfigError::BadEnv {
            var: var.into(),
            message: format!("{v:?} is not a number"),
        })
    }
    fn boolean(var: &str, v: &str) -> Result<bool, ConfigError> {
        match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err(ConfigError::BadEnv {
                var: var.into(),
                message: format!("{v:?} is not a boolean (true/false)"),
            }),
        }
    }
    let mut unknown = Vec::new();
    for (k, v) in vars {
        let (k, v) = (k.as_ref(), v.as_ref());
        match k {
            "SLUICE_LISTEN" => cfg.listen = v.into(),
            "SLUICE_DATA_DIR" => cfg.data_dir = v.into(),
            "SLUICE_AUTO_CREATE_DATABASES" => cfg.auto_create_databases = boolean(k, v)?,
            "SLUICE_DATABASES" => cfg.databases = parse_databases_env(v)?,
            "SLUICE_POOL_CONNECTIONS" => cfg.pool.connections = num(k, v)?,
            "SLUICE_POOL_FLUSH_WORKERS" => cfg.pool.flush_workers = num(k, v)?,
            "SLUICE_POOL_MAX_POINTS_PER_BATCH" => cfg.pool.max_points_per_batch = num(k, v)?,
            "SLUICE_POOL_FLUSH_INTERVAL" => cfg.pool.flush_interval = parse_duration(v)?,
            "SLUICE_LIMITS_MAX_BODY_BYTES" => cfg.limits.max_body_bytes = v.parse()?,
            "SLUICE_LIMITS_MAX_DECOMPRESSED_BYTES" => {
                cfg.limits.max_decompressed_bytes = v.parse()?
            }
            "SLUICE_LIMITS_MAX_SERIES" => cfg.limits.max_series = num(k, v)?,
            "SLUICE_LIMITS_WAL_QUEUE_DEPTH" => cfg.limits.wal_queue_depth = num(k, v)?,
            "SLUICE_LIMITS_MAX_WAL_BACKLOG_BYTES" => {
                cfg.limits.max_wal_backlog_bytes = v.parse()?
            }
            "SLUICE_LIMITS_MAX_WAL_DISK_BYTES" => cfg.limits.max_wal_disk_bytes = v.parse()?,
            "SLUICE_LIMITS_MIN_FREE_DISK_BYTES" => cfg.limits.min_free_disk_bytes = v.parse()?,
            "SLUICE_LIMITS_WAL_MEMTABLE_BYTES" => cfg.limits.wal_memtable_bytes = v.parse()?,
            "SLUICE_LIMITS_PRETOUCH_BYTES" => cfg.limits.pretouch_bytes = v.parse()?,
            "SLUICE_LIMITS_MAX_FIELDS_PER_MEASUREMENT" => {
                cfg.limits.max_fields_per_measurement = num(k, v)?
            }
            "SLUICE_LIMITS_MAX_MEASUREMENTS_PER_DATABASE" => {
                cfg.limits.max_measurements_per_database = num(k, v)?
            }
            "SLUICE_LIMITS_MAX_DATABASES" => cfg.limits.max_databases = num(k, v)?,
            "SLUICE_LIMITS_MAX_TAGS_PER_SERIES" => cfg.limits.max_tags_per_series = num(k, v)?,
            "SLUICE_LIMITS_MAX_NEW_SERIES_PER_REQUEST" => {
                cfg.limits.max_new_series_per_request = num(k, v)?
            }
            "SLUICE_LIMITS_MAX_REQUESTS_IN_FLIGHT" => {
                cfg.limits.max_requests_in_flight = num(k, v)?
            }
            "SLUICE_LIMITS_REQUEST_MEMORY_BYTES" => cfg.limits.request_memory_bytes = v.parse()?,
            "SLUICE_LIMITS_BODY_READ_TIMEOUT" => cfg.limits.body_read_timeout = parse_duration(v)?,
            "SLUICE_LIMITS_MEMORY_BYTES" => cfg.limits.memory_bytes = v.parse()?,
            "SLUICE_QUERY_TIMEOUT" => cfg.query.timeout = parse_duration(v)?,
            "SLUICE_QUERY_MAX_MEMORY_BYTES" => cfg.query.max_memory_bytes = v.parse()?,
            "SLUICE_QUERY_MAX_ROWS_TO_READ" => cfg.query.max_rows_to_read = num(k, v)?,
            "SLUICE_QUERY_MAX_RESULT_BYTES" => cfg.query.max_result_bytes = v.parse()?,
            "SLUICE_QUERY_QUEUE_TIMEOUT" => cfg.query.queue_timeout = parse_duration(v)?,
            "SLUICE_AUTH_TOKENS" => cfg.auth.tokens = items(v, ',').map(String::from).collect(),
            "SLUICE_AUTH_TOKENS_FILE" => cfg.auth.tokens_file = Some(v.into()),
            "SLUICE_CLUSTER_PEERS" => cfg.cluster.peers = items(v, ',').map(String::from).collect(),
            "SLUICE_CLUSTER_PEERS_FILE" => cfg.cluster.peers_file = Some(v.into()),
            "SLUICE_SERIES_CLUSTER_TAG" => {
                cfg.series.cluster_tag = Some(v.trim()).filter(|t| !t.is_empty()).map(String::from)
            }
            "SLUICE_CLUSTER_TOKEN" => cfg.cluster.token = Some(v.into()),
            "SLUICE_CLUSTER_TOKEN_FILE" => cfg.cluster.token_file = Some(v.into()),
            "SLUICE_CLUSTER_CONNECT_TIMEOUT" => cfg.cluster.connect_timeout = parse_duration(v)?,
            "SLUICE_CLUSTER_RECEIVE_TIMEOUT" => cfg.cluster.receive_timeout = parse_duration(v)?,
            "SLUICE_CLUSTER_HANDOFF_CHUNK_ROWS" => cfg.cluster.handoff_chunk_rows = num(k, v)?,
            _ if k.starts_with("SLUICE_") && !NON_CONFIG_ENV.iter().any(|p| k.starts_with(p)) => {
                unknown.push(k.to_string())
            }
            _ => {}
        }
    }
    Ok(unknown)
}

/// `SLUICE_*` variables that belong to the tooling (scripts, logging, tests), not the config.
const NON_CONFIG_ENV: &[&str] = &["SLUICE_LOG", "SLUICE_CACHE", "SLUICE_TEST", "SLUICE_BENCH"];

/// The non-empty items of a list separated by `sep`, trimmed.
fn items(v: &str, sep: char) -> impl Iterator<Item = &str> {
    v.split(sep).map(str::trim).filter(|i| !i.is_empty())
}

/// `telegraf:autogen=30d*,raw=7d;metrics` — databases separated by `;`, policies by `,`,
/// `*` marks the default; a database without policies gets `autogen`.
fn parse_databases_env(v: &str) -> Result<Vec<DatabaseConfig>, ConfigError> {
    let bad = |m: String| ConfigError::BadEnv {
        var: "SLUICE_DATABASES".into(),
        message: m,
    };
    let mut out = Vec::new();
    for part in items(v, ';') {
        let (name, rps) = part.split_once(':').unwrap_or((part, ""));
        let mut retention_policies = Vec::new();
        for rp in items(rps, ',') {
            let (rp, default) = match rp.strip_suffix('*') {
                Some(r) => (r, true),
                None => (rp, false),
            };
            let (rp_name, dur) = rp.split_once('=').unwrap_or((rp, "inf"));
            retention_policies.push(RetentionPolicyConfig {
                name: rp_name.trim().into(),
                duration: dur.parse().map_err(|e: ConfigError| bad(e.to_string()))?,
                default,
            });
        }
        if retention_policies.len() == 1 {
            retention_policies[0].default = true;
        }
        out.push(DatabaseConfig {
            name: name.trim().into(),
            retention_policies,
        });
    }
    Ok(out)
}
