//! Names of the server's metrics that other parts read: the operator's autoscaler scrapes
//! them from every pod, the alerts and the dashboard query them. The server registers its
//! metrics under [`PREFIX`]; [`full`] gives the name as exported.

/// Every server metric is `sluice_<name>`.
pub const PREFIX: &str = "sluice";
/// Points received in write requests, valid or not (counter), counted when the write is answered
/// (acknowledged, rejected or failed) so that it never runs ahead of the acknowledged ones.
pub const POINTS_OFFERED: &str = "points_offered_total";
/// Points durably committed and acknowledged (counter).
pub const POINTS_ACKNOWLEDGED: &str = "points_acknowledged_total";
/// Points refused for what they are, by `reason` (`invalid`, `series_limit`) (counter).
pub const POINTS_REJECTED: &str = "points_rejected_total";
/// Request latency by `endpoint` (histogram, seconds).
pub const REQUEST_DURATION: &str = "http_request_duration_seconds";
/// Requests by `endpoint` and `code` (counter).
pub const REQUESTS: &str = "http_requests_total";
/// Committed WAL bytes not yet flushed (gauge).
pub const WAL_BACKLOG_BYTES: &str = "wal_backlog_bytes";
/// Points accepted per write request, by `format` (`lp`, `msgpack`) and `encoding`
/// (`identity`, `gzip`) (histogram): the operator's calibration sends what the tenant's
/// traffic looks like (its mean is points per request, its counts the protocol mix).
pub const WRITE_REQUEST_POINTS: &str = "write_request_points";
/// Field values of the points accepted (counter): over the histogram's sum, fields per point.
pub const WRITE_FIELD_VALUES: &str = "write_field_values_total";
/// Distinct series known to the server (gauge).
pub const SERIES: &str = "series";
/// The `format` label values of [`WRITE_REQUEST_POINTS`].
pub const FORMATS: &[&str] = &["lp", "msgpack"];
/// The `endpoint` label values of writes.
pub const WRITE_ENDPOINTS: &[&str] = &["write", "write_v2"];

/// The exported name of `name`.
pub fn full(name: &str) -> String {
    format!("{PREFIX}_{name}")
}
