//! The limits a tenant sets on its servers: requests, schema growth and queries. Defaults are
//! the server's own (`sluice_core::config`).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use sluice_core::config::{format_duration, LimitsConfig, QueryConfig};

use super::{rule_duration, rule_size};

/// Request and cardinality limits of each server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitsSpec {
    /// Largest request body as sent (413 beyond).
    #[serde(default = "default_max_body_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_body_bytes: String,
    /// Largest body after gzip decompression (413 beyond).
    #[serde(default = "default_max_decompressed_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_decompressed_bytes: String,
    /// Distinct series per server (422 beyond).
    #[serde(default = "default_max_series")]
    #[schemars(range(min = 1))]
    pub max_series: i64,
    /// Requests waiting for the WAL committer (503 beyond).
    #[serde(default = "default_wal_queue_depth")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub wal_queue_depth: i32,
    /// Committed but unflushed WAL bytes (503 beyond).
    #[serde(default = "default_max_wal_backlog_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_wal_backlog_bytes: String,
    /// Bytes the WAL may take on disk, flushed entries not yet compacted away included (503
    /// beyond). Keep it below the volume's size (`spec.storage`).
    #[serde(default = "default_max_wal_disk_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_wal_disk_bytes: String,
    /// Free space the data volume keeps; writes get 503 below it; 0 turns the check off.
    #[serde(default = "default_min_free_disk_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub min_free_disk_bytes: String,
    /// One in-memory table of the WAL; the WAL holds up to four in memory.
    #[serde(default = "default_wal_memtable_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub wal_memtable_bytes: String,
    /// Memory touched once at start-up so load jumps reuse mapped pages; 0 turns it off.
    #[serde(default = "default_pretouch_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub pretouch_bytes: String,
    /// Distinct fields one measurement may have (400 for lines adding more).
    #[serde(default = "default_max_fields_per_measurement")]
    #[schemars(range(min = 1))]
    pub max_fields_per_measurement: i32,
    /// Measurements one database and retention policy may have.
    #[serde(default = "default_max_measurements_per_database")]
    #[schemars(range(min = 1))]
    pub max_measurements_per_database: i32,
    /// Databases a server holds.
    #[serde(default = "default_max_databases")]
    #[schemars(range(min = 1))]
    pub max_databases: i32,
    /// Tags one series may have.
    #[serde(default = "default_max_tags_per_series")]
    #[schemars(range(min = 1))]
    pub max_tags_per_series: i32,
    /// New series one request may define (422 for the rest).
    #[serde(default = "default_max_new_series_per_request")]
    #[schemars(range(min = 1))]
    pub max_new_series_per_request: i32,
    /// Reads and writes served at once (503 beyond).
    #[serde(default = "default_max_requests_in_flight")]
    #[schemars(range(min = 1))]
    pub max_requests_in_flight: i32,
    /// Memory for request bodies, inflated and parsed, across requests (503 beyond).
    #[serde(default = "default_request_memory_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub request_memory_bytes: String,
    /// Time a client has to send its body (408 beyond).
    #[serde(default = "default_body_read_timeout")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_duration())]
    pub body_read_timeout: String,
}

impl Default for LimitsSpec {
    fn default() -> Self {
        Self {
            max_body_bytes: default_max_body_bytes(),
            max_decompressed_bytes: default_max_decompressed_bytes(),
            max_series: default_max_series(),
            wal_queue_depth: default_wal_queue_depth(),
            max_wal_backlog_bytes: default_max_wal_backlog_bytes(),
            max_wal_disk_bytes: default_max_wal_disk_bytes(),
            min_free_disk_bytes: default_min_free_disk_bytes(),
            wal_memtable_bytes: default_wal_memtable_bytes(),
            pretouch_bytes: default_pretouch_bytes(),
            max_fields_per_measurement: default_max_fields_per_measurement(),
            max_measurements_per_database: default_max_measurements_per_database(),
            max_databases: default_max_databases(),
            max_tags_per_series: default_max_tags_per_series(),
            max_new_series_per_request: default_max_new_series_per_request(),
            max_requests_in_flight: default_max_requests_in_flight(),
            request_memory_bytes: default_request_memory_bytes(),
            body_read_timeout: default_body_read_timeout(),
        }
    }
}

fn default_max_body_bytes() -> String {
    LimitsConfig::default().max_body_bytes.to_string()
}
fn default_max_decompressed_bytes() -> String {
    LimitsConfig::default().max_decompressed_bytes.to_string()
}
fn default_max_series() -> i64 {
    i64::try_from(LimitsConfig::default().max_series).unwrap_or(i64::MAX)
}
fn default_wal_queue_depth() -> i32 {
    i32::try_from(LimitsConfig::default().wal_queue_depth).unwrap_or(i32::MAX)
}
fn default_max_wal_backlog_bytes() -> String {
    LimitsConfig::default().max_wal_backlog_bytes.to_string()
}
fn default_max_wal_disk_bytes() -> String {
    LimitsConfig::default().max_wal_disk_bytes.to_string()
}
fn default_min_free_disk_bytes() -> String {
    LimitsConfig::default().min_free_disk_bytes.to_string()
}
fn default_wal_memtable_bytes() -> String {
    LimitsConfig::default().wal_memtable_bytes.to_string()
}
fn default_pretouch_bytes() -> String {
    LimitsConfig::default().pretouch_bytes.to_string()
}

fn i32_of(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}
fn default_max_fields_per_measurement() -> i32 {
    i32_of(LimitsConfig::default().max_fields_per_measurement)
}
fn default_max_measurements_per_database() -> i32 {
    i32_of(LimitsConfig::default().max_measurements_per_database)
}
fn default_max_databases() -> i32 {
    i32_of(LimitsConfig::default().max_databases)
}
fn default_max_tags_per_series() -> i32 {
    i32_of(LimitsConfig::default().max_tags_per_series)
}
fn default_max_new_series_per_request() -> i32 {
    i32_of(LimitsConfig::default().max_new_series_per_request)
}
fn default_max_requests_in_flight() -> i32 {
    i32_of(LimitsConfig::default().max_requests_in_flight)
}
fn default_request_memory_bytes() -> String {
    LimitsConfig::default().request_memory_bytes.to_string()
}
fn default_body_read_timeout() -> String {
    format_duration(LimitsConfig::default().body_read_timeout)
}

/// Limits of every `/sql` and `/query` statement; the answer names the one a query hit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuerySpec {
    /// Wall-clock time a query may run.
    #[serde(default = "default_query_timeout")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_duration())]
    pub timeout: String,
    /// Memory one query may use.
    #[serde(default = "default_query_max_memory_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_memory_bytes: String,
    /// Rows one query may read.
    #[serde(default = "default_query_max_rows_to_read")]
    #[schemars(range(min = 1))]
    pub max_rows_to_read: i64,
    /// Bytes of result one query may return.
    #[serde(default = "default_query_max_result_bytes")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_size())]
    pub max_result_bytes: String,
    /// How long a query waits for one of `spec.pool.connections` before it answers 503.
    #[serde(default = "default_query_queue_timeout")]
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = rule_duration())]
    pub queue_timeout: String,
}

impl Default for QuerySpec {
    fn default() -> Self {
        Self {
            timeout: default_query_timeout(),
            max_memory_bytes: default_query_max_memory_bytes(),
            max_rows_to_read: default_query_max_rows_to_read(),
            max_result_bytes: default_query_max_result_bytes(),
            queue_timeout: default_query_queue_timeout(),
        }
    }
}

fn default_query_timeout() -> String {
    format_duration(QueryConfig::default().timeout)
}
fn default_query_max_memory_bytes() -> String {
    QueryConfig::default().max_memory_bytes.to_string()
}
fn default_query_max_rows_to_read() -> i64 {
    i64::try_from(QueryConfig::default().max_rows_to_read).unwrap_or(i64::MAX)
}
fn default_query_max_result_bytes() -> String {
    QueryConfig::default().max_result_bytes.to_string()
}
fn default_query_queue_timeout() -> String {
    format_duration(QueryConfig::default().queue_timeout)
}
