//! Names of the server's metrics that other parts read: the operator's autoscaler scrapes
//! them from every pod, the alerts and the dashboard query them. The server registers its
//! metrics under [`PREFIX`]; [`full`] gives the name as exported.

/// Every server metric is `sluice_<name>`.
pub const PREFIX: &str = "sluice";
/// Points received in write requests, valid or not (counter).
pub const POINTS_OFFERED: &str = "points_offered_total";
/// Points durably committed and acknowledged (counter).
pub const POINTS_ACKNOWLEDGED: &str = "points_acknowledged_total";
/// Request latency by `endpoint` (histogram, seconds).
pub const REQUEST_DURATION: &str = "http_request_duration_seconds";
/// Requests by `endpoint` and `code` (counter).
pub const REQUESTS: &str = "http_requests_total";
/// Committed WAL bytes not yet flushed (gauge).
pub const WAL_BACKLOG_BYTES: &str = "wal_backlog_bytes";
/// The `endpoint` label values of writes.
pub const WRITE_ENDPOINTS: &[&str] = &["write", "write_v2"];

/// The exported name of `name`.
pub fn full(name: &str) -> String {
    format!("{PREFIX}_{name}")
}
