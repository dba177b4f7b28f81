//! The server configuration: one schema shared by `sluice-server`, which reads it, and the
//! operator, which renders it into a ConfigMap. Keeping it here (no chDB, no Kubernetes) is what
//! lets the operator produce exactly what the server accepts without linking the engine.
//!
//! The file is TOML with `snake_case` keys; every key can also be set through an environment
//! variable `SLUICE_<KEY>` (see [`apply_env`]). Durations are InfluxDB-style (`90s`, `1h30m`,
//! `30d`, `2w`, `inf`); sizes are bytes or a number with a unit (`64MiB`, `64Mi`, `1GB`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::names::{validate_name, NameError};

mod env;
mod units;

pub use env::{apply_env, ENV_KEYS};
use units::duration_str;
pub use units::{format_duration, parse_duration, ByteSize, RetentionDuration};

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
    /// How series ids are made. Left out of the rendered file when on its defaults, so a
    /// tenant that never sets it keeps the bytes (and the config hash) it had before.
    #[serde(skip_serializing_if = "SeriesConfig::is_plain")]
    pub series: SeriesConfig,
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
            series: SeriesConfig::default(),
        }
    }
}

/// How series ids are made (see `sluice_core::series`). Fixed for a data directory's life:
/// the server records it there and refuses to start under another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SeriesConfig {
    /// A tag key whose value gives each series id its top 16 bits, so that the series sharing
    /// a value (one region, one datacenter) lie together in every table and a read of one value
    /// opens only their part of it. Pick the tag dashboards filter on most that has few values;
    /// series without it keep plain ids.
    pub cluster_tag: Option<String>,
}

impl SeriesConfig {
    pub fn is_plain(&self) -> bool {
        self.cluster_tag.is_none()
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
    #[error("series.cluster_tag {0:?}: expected a tag key of 1 to 256 bytes other than \"time\"")]
    BadClusterTag(String),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{key} is {value}, below the smallest allowed {min}")]
    TooSmall {
        key: &'static str,
        value: ByteSize,
        min: ByteSize,
    },
}

/// Longest `series.cluster_tag`.
pub const MAX_CLUSTER_TAG_LEN: usize = 256;

/// Smallest `limits.wal_memtable_bytes`: below it RocksDB would write a file for every few
/// requests.
pub const MIN_WAL_MEMTABLE_BYTES: ByteSize = ByteSize(1 << 20);

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
        if let Some(tag) = &self.series.cluster_tag {
            if tag.is_empty() || tag == "time" || tag.len() > MAX_CLUSTER_TAG_LEN {
                return Err(ConfigError::BadClusterTag(tag.clone()));
            }
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

#[cfg(test)]
mod tests;
