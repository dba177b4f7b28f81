//! The server configuration: one schema shared by `sluice-server`, which reads it, and the
//! operator, which renders it into a ConfigMap. Keeping it here (no chDB, no Kubernetes) is what
//! lets the operator produce exactly what the server accepts without linking the engine.
//!
//! The file is TOML with `snake_case` keys; every key can also be set through an environment
//! variable `SLUICE_<KEY>` (see [`apply_env`]). Durations are InfluxDB-style (`90s`, `1h30m`,
//! `30d`, `2w`, `inf`); sizes are bytes or a number with a unit (`64MiB`, `64Mi`, `1GB`).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::names::{validate_name, NameError};

/// Everything `sluice-server` can be told. Defaults are the embedded defaults a newcomer runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the HTTP API listens on.
    pub listen: String,
    /// Directory for the write-ahead log (`wal/`) and chDB's data (`chdb/`).
    pub data_dir: String,
    /// Create a database on first write (and on `CREATE DATABASE`) when it is not declared.
    pub auto_create_databases: bool,
    /// Databases that exist from the start, with their retention policies.
    pub databases: Vec<DatabaseConfig>,
    pub pool: PoolConfig,
    pub limits: LimitsConfig,
    pub query: QueryConfig,
    pub auth: AuthConfig,
    pub cluster: ClusterConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8086".into(),
            data_dir: "./data".into(),
            auto_create_databases: true,
            databases: Vec::new(),
            pool: PoolConfig::default(),
            limits: LimitsConfig::default(),
            query: QueryConfig::default(),
            auth: AuthConfig::default(),
            cluster: ClusterConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    pub name: String,
    /// Empty means one policy, `autogen`, infinite and default, as InfluxDB creates it.
    #[serde(default)]
    pub retention_policies: Vec<RetentionPolicyConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionPolicyConfig {
    pub name: String,
    /// How long points are kept; `inf` (or `0s`) keeps them forever.
    #[serde(default = "RetentionDuration::infinite")]
    pub duration: RetentionDuration,
    #[serde(default)]
    pub default: bool,
}

impl RetentionPolicyConfig {
    /// The policy InfluxDB gives a database created without one.
    pub fn autogen() -> Self {
        Self {
            name: "autogen".into(),
            duration: RetentionDuration::infinite(),
            default: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolConfig {
    /// Read-only chDB connections for `/sql` and `/query`: at most this many queries run at
    /// once, and flushes have connections of their own.
    pub connections: u32,
    /// Threads that move committed WAL ranges into chDB.
    pub flush_workers: u32,
    /// Upper bound on rows per chDB insert; bigger batches make fewer, larger parts.
    pub max_points_per_batch: u32,
    /// A table's pending points are flushed at least this often, however few there are.
    #[serde(with = "duration_str")]
    pub flush_interval: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            connections: 2,
            flush_workers: 1,
            max_points_per_batch: 1_000_000,
            flush_interval: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest request body accepted as sent (compressed or not); larger answers 413.
    pub max_body_bytes: ByteSize,
    /// Largest body after gzip decompression; a larger one answers 413 (gzip bombs).
    pub max_decompressed_bytes: ByteSize,
    /// Distinct series the server accepts; a write that would add more answers 422.
    pub max_series: u64,
    /// Requests waiting for the WAL committer; when full, writes answer 503 + Retry-After.
    pub wal_queue_depth: u32,
    /// Committed but not yet flushed WAL bytes; above it writes answer 503 + Retry-After.
    pub max_wal_backlog_bytes: ByteSize,
    /// Bytes the WAL's directory may take on disk (live entries, entries flushed but not yet
    /// compacted away, logs); above it writes answer 503 + Retry-After while the space is
    /// reclaimed.
    pub max_wal_disk_bytes: ByteSize,
    /// Free space the data volume must keep (for chDB's parts and merges, and the WAL's
    /// compactions); below it writes answer 503 + Retry-After. At most a tenth of the volume
    /// is asked for; 0 turns the check off.
    pub min_free_disk_bytes: ByteSize,
    /// One in-memory table of the WAL (RocksDB memtable). Up to four are held, two sealed ones
    /// are written out together, so the WAL takes up to four times this in memory; larger
    /// ones let entries be deleted before they are ever written a second time (SST files).
    pub wal_memtable_bytes: ByteSize,
    /// Memory the server touches once at start-up and keeps for its buffers, so that a jump in
    /// load does not fault fresh pages in on the request path; 0 turns it off. It is resident
    /// from the start and counts against the memory budget (at most a quarter of what the
    /// budget shares out, see `limits.memory_bytes`).
    pub pretouch_bytes: ByteSize,
    /// Distinct fields (columns) one measurement may have; a line adding more answers 400.
    pub max_fields_per_measurement: u32,
    /// Measurements one database (and retention policy) may have.
    pub max_measurements_per_database: u32,
    /// Databases the server holds (declared ones included); auto-creating more answers 400.
    pub max_databases: u32,
    /// Tags one series may have.
    pub max_tags_per_series: u32,
    /// New series one request may define; the rest of its lines answer 422. Each costs memory
    /// for its tags while the request is parsed, far beyond its bytes in the body.
    pub max_new_series_per_request: u32,
    /// Requests (writes and reads) being served at once; more answer 503 + Retry-After.
    pub max_requests_in_flight: u32,
    /// Memory requests may hold at once while they are read, decompressed and parsed; a
    /// request that would go over answers 503 + Retry-After.
    pub request_memory_bytes: ByteSize,
    /// Time a client has to send its whole body; slower bodies answer 408.
    #[serde(with = "duration_str")]
    pub body_read_timeout: Duration,
    /// Memory the server plans for (see the server's `memory` module); 0 means its cgroup's
    /// limit, else 1 GiB. A smaller cgroup limit still wins; outside a container a larger
    /// budget has to be asked for.
    pub memory_bytes: ByteSize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: ByteSize(64 << 20),
            max_decompressed_bytes: ByteSize(64 << 20),
            max_series: 1_000_000,
            wal_queue_depth: 256,
            max_wal_backlog_bytes: ByteSize(2 << 30),
            max_wal_disk_bytes: ByteSize(8 << 30),
            min_free_disk_bytes: ByteSize(1 << 30),
            wal_memtable_bytes: ByteSize(256 << 20),
            pretouch_bytes: ByteSize(512 << 20),
            max_fields_per_measurement: 1024,
            max_measurements_per_database: 10_000,
            max_databases: 100,
            max_tags_per_series: 256,
            max_new_series_per_request: 250_000,
            max_requests_in_flight: 256,
            request_memory_bytes: ByteSize(512 << 20),
            body_read_timeout: Duration::from_secs(30),
            memory_bytes: ByteSize(0),
        }
    }
}

/// Limits of every `/sql` and `/query` statement, so that no read can take the memory, the
/// CPU or the connections that writes need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryConfig {
    /// Wall-clock time a query may run; past it the engine stops it and the answer says so.
    #[serde(with = "duration_str")]
    pub timeout: Duration,
    /// Memory one query may use in the engine.
    pub max_memory_bytes: ByteSize,
    /// Rows one query may read from tables (and table functions such as `numbers`).
    pub max_rows_to_read: u64,
    /// Bytes of result one query may return (streamed to the client as it is produced).
    pub max_result_bytes: ByteSize,
    /// How long a query waits for a free connection before it answers 503.
    #[serde(with = "duration_str")]
    pub queue_timeout: Duration,
}

impl Default for QueryConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_memory_bytes: ByteSize(256 << 20),
            max_rows_to_read: 2_000_000_000,
            max_result_bytes: ByteSize(256 << 20),
            queue_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Accepted tokens. Empty (and no `tokens_file`) means authentication is off.
    pub tokens: Vec<String>,
    /// A file with one token per line (a mounted Secret), read at start-up.
    pub tokens_file: Option<String>,
}

impl AuthConfig {
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty() || self.tokens_file.is_some()
    }
}

/// The tenant's other pods, for reads that gather from all of them (`/query`, `/sql` with
/// `inner`). With fewer than two peers a pod answers from its own data alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Every pod of the tenant as `host:port`, this one included.
    pub peers: Vec<String>,
    /// A file with one `host:port` per line, read again whenever it changes: the operator
    /// mounts the tenant's peer list from a ConfigMap, so a new replica count reaches the pods
    /// without restarting them. Its peers come after `peers`.
    pub peers_file: Option<String>,
    /// The token pods present to each other's internal endpoint. Without one (and no
    /// `token_file`) the endpoint is off and reads cannot gather.
    pub token: Option<String>,
    /// A file holding the token (a mounted Secret), read at start-up.
    pub token_file: Option<String>,
    /// Longest wait for a peer to accept a connection.
    #[serde(with = "duration_str")]
    pub connect_timeout: Duration,
    /// Longest wait for a peer's next bytes once connected: a peer slower than this fails the
    /// read (or is left out with `partial=true`).
    #[serde(with = "duration_str")]
    pub receive_timeout: Duration,
    /// Rows per chunk when a decommissioned pod hands its tables over: a kill makes the
    /// receiver copy at most this much again (the copy streams; memory does not depend on it).
    pub handoff_chunk_rows: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            peers: Vec::new(),
            peers_file: None,
            token: None,
            token_file: None,
            connect_timeout: Duration::from_secs(2),
            receive_timeout: Duration::from_secs(30),
            handoff_chunk_rows: 2_000_000,
        }
    }
}

/// A retention duration; `None` is infinite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionDuration(pub Option<Duration>);

impl RetentionDuration {
    pub fn infinite() -> Self {
        Self(None)
    }
}

impl Default for RetentionDuration {
    fn default() -> Self {
        Self::infinite()
    }
}

impl fmt::Display for RetentionDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("inf"),
            Some(d) => f.write_str(&format_duration(d)),
        }
    }
}

impl std::str::FromStr for RetentionDuration {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("inf") || t.eq_ignore_ascii_case("infinite") {
            return Ok(Self(None));
        }
        let d = parse_duration(t)?;
        Ok(Self(if d.is_zero() { None } else { Some(d) }))
    }
}

impl Serialize for RetentionDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for RetentionDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A byte count that reads `67108864`, `"64MiB"`, `"64Mi"` or `"64MB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{}", self.0 / size, unit);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for ByteSize {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num
            .parse()
            .map_err(|_| ConfigError::BadSize(s.to_string()))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "K" | "KB" => 1_000,
            "Ki" | "KiB" => 1 << 10,
            "M" | "MB" => 1_000_000,
            "Mi" | "MiB" => 1 << 20,
            "G" | "GB" => 1_000_000_000,
            "Gi" | "GiB" => 1 << 30,
            "T" | "TB" => 1_000_000_000_000,
            "Ti" | "TiB" => 1 << 40,
            _ => return Err(ConfigError::BadSize(s.to_string())),
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| ConfigError::BadSize(s.to_string()))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(ByteSize(n)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

mod duration_str {
    use super::*;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid duration {0:?}: expected a number and unit (ns, us, ms, s, m, h, d, w), e.g. 30d or 1h30m")]
    BadDuration(String),
    #[error("invalid size {0:?}: expected bytes or a number with a unit (KiB, MiB, GiB, Ki, Mi, Gi, KB, MB, GB)")]
    BadSize(String),
    #[error("environment variable {var}: {message}")]
    BadEnv { var: String, message: String },
    #[error("database {database:?}: {source}")]
    BadDatabaseName { database: String, source: NameError },
    #[error("database {database:?}, retention policy {policy:?}: {source}")]
    BadPolicyName {
        database: String,
        policy: String,
        source: NameError,
    },
    #[error("database {0:?} is declared twice")]
    DuplicateDatabase(String),
    #[error("database {database:?}: retention policy {policy:?} is declared twice")]
    DuplicatePolicy { database: String, policy: String },
    #[error("database {database:?}: exactly one retention policy must be default, found {count}")]
    DefaultPolicyCount { database: String, count: usize },
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{key} is {value}, below the smallest allowed {min}")]
    TooSmall {
        key: &'static str,
        value: ByteSize,
        min: ByteSize,
    },
}

/// Smallest `limits.wal_memtable_bytes`: below it RocksDB would write a file for every few
/// requests.
pub const MIN_WAL_MEMTABLE_BYTES: ByteSize = ByteSize(1 << 20);

/// Parses an InfluxDB-style duration: one or more `<integer><unit>` groups.
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::BadDuration(s.to_string());
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u128 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ns: u128 = match unit {
            "ns" => 1,
            "u" | "us" | "µ" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "d" => 86_400 * 1_000_000_000,
            "w" => 7 * 86_400 * 1_000_000_000,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(ns)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// The shortest exact rendering in the largest units, e.g. `30d`, `1h30m`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let mut ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    const UNITS: [(&str, u128); 7] = [
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    let mut out = String::new();
    for (unit, size) in UNITS {
        if ns >= size {
            out.push_str(&format!("{}{}", ns / size, unit));
            ns %= size;
        }
    }
    out
}

impl ServerConfig {
    /// Checks what serde cannot: names usable as table-name parts, one default policy per
    /// database, no duplicates, non-zero pool sizes. Also fills in `autogen` where a database
    /// declares no policy.
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        if self.pool.connections == 0 {
            return Err(ConfigError::Zero("pool.connections"));
        }
        if self.pool.flush_workers == 0 {
            return Err(ConfigError::Zero("pool.flush_workers"));
        }
        if self.pool.max_points_per_batch == 0 {
            return Err(ConfigError::Zero("pool.max_points_per_batch"));
        }
        if self.pool.flush_interval.is_zero() {
            return Err(ConfigError::Zero("pool.flush_interval"));
        }
        if self.limits.wal_queue_depth == 0 {
            return Err(ConfigError::Zero("limits.wal_queue_depth"));
        }
        let nonzero: [(&'static str, u64); 10] = [
            (
                "limits.max_wal_disk_bytes",
                self.limits.max_wal_disk_bytes.0,
            ),
            (
                "limits.max_fields_per_measurement",
                self.limits.max_fields_per_measurement.into(),
            ),
            (
                "limits.max_measurements_per_database",
                self.limits.max_measurements_per_database.into(),
            ),
            ("limits.max_databases", self.limits.max_databases.into()),
            (
                "limits.max_tags_per_series",
                self.limits.max_tags_per_series.into(),
            ),
            (
                "limits.max_new_series_per_request",
                self.limits.max_new_series_per_request.into(),
            ),
            (
                "limits.max_requests_in_flight",
                self.limits.max_requests_in_flight.into(),
            ),
            ("query.max_rows_to_read", self.query.max_rows_to_read),
            ("query.max_memory_bytes", self.query.max_memory_bytes.0),
            ("query.max_result_bytes", self.query.max_result_bytes.0),
        ];
        if let Some((key, _)) = nonzero.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::Zero(key));
        }
        if self.query.timeout.is_zero() {
            return Err(ConfigError::Zero("query.timeout"));
        }
        if self.limits.wal_memtable_bytes < MIN_WAL_MEMTABLE_BYTES {
            return Err(ConfigError::TooSmall {
                key: "limits.wal_memtable_bytes",
                value: self.limits.wal_memtable_bytes,
                min: MIN_WAL_MEMTABLE_BYTES,
            });
        }
        let mut seen = std::collections::HashSet::new();
        for db in &mut self.databases {
            validate_name(&db.name).map_err(|source| ConfigError::BadDatabaseName {
                database: db.name.clone(),
                source,
            })?;
            if !seen.insert(db.name.clone()) {
                return Err(ConfigError::DuplicateDatabase(db.name.clone()));
            }
            if db.retention_policies.is_empty() {
                db.retention_policies.push(RetentionPolicyConfig::autogen());
            }
            let mut rps = std::collections::HashSet::new();
            for rp in &db.retention_policies {
                validate_name(&rp.name).map_err(|source| ConfigError::BadPolicyName {
                    database: db.name.clone(),
                    policy: rp.name.clone(),
                    source,
                })?;
                if !rps.insert(rp.name.clone()) {
                    return Err(ConfigError::DuplicatePolicy {
                        database: db.name.clone(),
                        policy: rp.name.clone(),
                    });
                }
            }
            let count = db.retention_policies.iter().filter(|r| r.default).count();
            if count != 1 {
                return Err(ConfigError::DefaultPolicyCount {
                    database: db.name.clone(),
                    count,
                });
            }
        }
        Ok(())
    }
}

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
            "SLUICE_AUTH_TOKENS" => {
                cfg.auth.tokens = v
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(String::from)
                    .collect()
            }
            "SLUICE_AUTH_TOKENS_FILE" => cfg.auth.tokens_file = Some(v.into()),
            "SLUICE_CLUSTER_PEERS" => {
                cfg.cluster.peers = v
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(String::from)
                    .collect()
            }
            "SLUICE_CLUSTER_PEERS_FILE" => cfg.cluster.peers_file = Some(v.into()),
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

/// `telegraf:autogen=30d*,raw=7d;metrics` — databases separated by `;`, policies by `,`,
/// `*` marks the default; a database without policies gets `autogen`.
fn parse_databases_env(v: &str) -> Result<Vec<DatabaseConfig>, ConfigError> {
    let bad = |m: String| ConfigError::BadEnv {
        var: "SLUICE_DATABASES".into(),
        message: m,
    };
    let mut out = Vec::new();
    for part in v.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, rps) = part.split_once(':').unwrap_or((part, ""));
        let mut retention_policies = Vec::new();
        for rp in rps.split(',').map(str::trim).filter(|r| !r.is_empty()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_render() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        for bad in [
            "",
            "d",
            "10",
            "1y",
            "-1s",
            "1.5h",
            "99999999999999999999999w",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn retention_zero_and_inf_are_infinite() {
        assert_eq!(
            "inf".parse::<RetentionDuration>().unwrap(),
            RetentionDuration(None)
        );
        assert_eq!(
            "0s".parse::<RetentionDuration>().unwrap(),
            RetentionDuration(None)
        );
        assert_eq!("7d".parse::<RetentionDuration>().unwrap().to_string(), "7d");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!("64MiB".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
        assert_eq!("64Mi".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
        assert_eq!("1GB".parse::<ByteSize>().unwrap(), ByteSize(1_000_000_000));
        assert_eq!("123".parse::<ByteSize>().unwrap(), ByteSize(123));
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(64 << 20).to_string(), "64MiB");
    }

    #[test]
    fn toml_round_trip_and_autogen_default() {
        let mut cfg = ServerConfig {
            databases: vec![DatabaseConfig {
                name: "telegraf".into(),
                retention_policies: vec![],
            }],
            ..Default::default()
        };
        cfg.validate().unwrap();
        assert_eq!(
            cfg.databases[0].retention_policies,
            vec![RetentionPolicyConfig::autogen()]
        );
    }

    #[test]
    fn validation_names_the_problem() {
        let mut cfg = ServerConfig {
            databases: vec![DatabaseConfig {
                name: "db".into(),
                retention_policies: vec![
                    RetentionPolicyConfig {
                        name: "a".into(),
                        duration: RetentionDuration(None),
                        default: true,
                    },
                    RetentionPolicyConfig {
                        name: "b".into(),
                        duration: RetentionDuration(None),
                        default: true,
                    },
                ],
            }],
            ..Default::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("exactly one retention policy"), "{err}");

        let mut cfg = ServerConfig {
            databases: vec![DatabaseConfig {
                name: "bad name".into(),
                retention_policies: vec![],
            }],
            ..Default::default()
        };
        assert!(cfg.validate().unwrap_err().to_string().contains("bad name"));
    }

    #[test]
    fn env_overrides() {
        let mut cfg = ServerConfig::default();
        apply_env(
            &mut cfg,
            [
                ("SLUICE_LISTEN", "0.0.0.0:9000"),
                ("SLUICE_POOL_FLUSH_INTERVAL", "250ms"),
                ("SLUICE_LIMITS_MAX_BODY_BYTES", "1Mi"),
                ("SLUICE_LIMITS_WAL_MEMTABLE_BYTES", "64MiB"),
                ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
                ("SLUICE_AUTH_TOKENS", "a, b"),
                ("SLUICE_DATABASES", "telegraf:autogen=30d*,raw=7d;metrics"),
                ("PATH", "/bin"),
            ],
        )
        .unwrap();
        assert_eq!(cfg.listen, "0.0.0.0:9000");
        assert_eq!(cfg.pool.flush_interval, Duration::from_millis(250));
        assert_eq!(cfg.limits.max_body_bytes, ByteSize(1 << 20));
        assert_eq!(cfg.limits.wal_memtable_bytes, ByteSize(64 << 20));
        assert_eq!(cfg.limits.pretouch_bytes, ByteSize(0));
        assert_eq!(cfg.auth.tokens, vec!["a", "b"]);
        assert_eq!(cfg.databases.len(), 2);
        assert!(cfg.databases[0].retention_policies[0].default);
        assert_eq!(
            cfg.databases[0].retention_policies[1].duration,
            RetentionDuration(Some(Duration::from_secs(7 * 86400)))
        );
        cfg.validate().unwrap();
        assert_eq!(cfg.databases[1].retention_policies[0].name, "autogen");

        let err = apply_env(&mut cfg, [("SLUICE_POOL_CONNECTIONS", "many")]).unwrap_err();
        assert!(err.to_string().contains("SLUICE_POOL_CONNECTIONS"));
        let unknown = apply_env(&mut cfg, [("SLUICE_NOPE", "1"), ("SLUICE_LOG", "x")]).unwrap();
        assert_eq!(unknown, vec!["SLUICE_NOPE"]);

        apply_env(&mut cfg, [("SLUICE_LIMITS_WAL_MEMTABLE_BYTES", "64KiB")]).unwrap();
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains("limits.wal_memtable_bytes") && err.contains("1MiB"),
            "{err}"
        );
    }
}
