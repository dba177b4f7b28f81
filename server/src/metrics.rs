//! Prometheus metrics. Names are a contract with the operator's autoscaler, the chart's alert
//! rules and dashboards: change them only together.

use sluice_core::metric_names as names;
use std::collections::HashSet;
use std::sync::{Mutex, RwLock};

use prometheus::{
    exponential_buckets, Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Seconds, 100 µs .. ~105 s in factors of two: wide enough for a 4 KiB fsync and a stalled
/// flush alike.
fn latency_buckets() -> Vec<f64> {
    exponential_buckets(0.0001, 2.0, 21).unwrap_or_default()
}

pub struct Metrics {
    pub registry: Registry,
    /// Shared while a write's outcome is counted, exclusive while `/metrics` gathers: a scrape
    /// sees all of one write's counts (acknowledged, rejected, offered) or none of them.
    write_counts: RwLock<()>,
    pub request_duration: HistogramVec,
    pub requests: IntCounterVec,
    pub stage_duration: HistogramVec,
    pub points_offered: IntCounter,
    pub points_acknowledged: IntCounter,
    pub points_rejected: IntCounterVec,
    pub points_flushed: IntCounter,
    pub points_read_back: IntCounter,
    pub write_request_points: HistogramVec,
    pub write_field_values: IntCounter,
    pub wal_backlog_bytes: IntGauge,
    pub wal_backlog_points: IntGauge,
    pub wal_disk_bytes: IntGauge,
    pub wal_reclaims: IntCounter,
    pub data_free_bytes: IntGauge,
    pub wal_oldest_age: Gauge,
    pub wal_queue: IntGauge,
    pub wal_group_requests: Histogram,
    pub flush_lag: Gauge,
    pub flush_failures: IntCounterVec,
    pub chdb_errors: IntCounterVec,
    /// Plans with tag conditions, by where their series came from
    /// ([`crate::query::series_ids`]).
    pub series_lookups: IntCounterVec,
    /// `SHOW` answers and shares, by whether they were kept from an earlier read
    /// ([`crate::query::remember`]).
    pub series_answers: IntCounterVec,
    /// Reads run again, by why ([`READ_RETRY_STALE_VIEW`], [`READ_RETRY_OWN_SHARE`]).
    pub read_retries: IntCounterVec,
    pub table_parts: IntGaugeVec,
    pub series: IntGauge,
    pub series_limit: IntGauge,
    pub ready: IntGauge,
    pub backpressure: IntCounterVec,
    pub flush_failing_tables: IntGauge,
    pub request_memory_available: IntGauge,
    pub requests_in_flight: IntGauge,
    /// Table names used as label values so far (see [`Metrics::table_label`]).
    table_labels: Mutex<HashSet<String>>,
}

/// Distinct table names that metrics carry as labels; the rest are reported as
/// [`OTHER_TABLES`]. Table names come from writers, so without a cap a client could make
/// the scrape (and Prometheus) as large as it likes.
pub const MAX_TABLE_LABELS: usize = 200;

/// `read_retries_total{reason}`: a hand-off began or moved during the read.
pub const READ_RETRY_STALE_VIEW: &str = "stale_handoff_view";

/// `read_retries_total{reason}`: this pod's share failed inside the gathering query.
pub const READ_RETRY_OWN_SHARE: &str = "own_share";

/// The label value standing for every table past [`MAX_TABLE_LABELS`].
pub const OTHER_TABLES: &str = "_other";

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some(names::PREFIX.into()), None)
            .expect("the metric prefix is a valid name");
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("metric definitions are static and valid");
                registry
                    .register(Box::new(m.clone()))
                    .expect("each metric is registered once");
                m
            }};
        }
        Self {
            request_duration: reg!(HistogramVec::new(
                HistogramOpts::new(
                    names::REQUEST_DURATION,
                    "HTTP request latency by endpoint, from first byte read to response"
                )
                .buckets(latency_buckets()),
                &["endpoint"]
            )),
            requests: reg!(IntCounterVec::new(
                Opts::new(names::REQUESTS, "HTTP requests by endpoint and status code"),
                &["endpoint", "code"]
            )),
            stage_duration: reg!(HistogramVec::new(
                HistogramOpts::new(
                    "stage_duration_seconds",
                    "Time spent per write-path stage: parse, series, encode, wal_commit, arrow, chdb_insert, flush"
                )
                .buckets(latency_buckets()),
                &["stage"]
            )),
            points_offered: reg!(IntCounter::new(
                names::POINTS_OFFERED,
                "Points received in write requests, valid or not, counted when the write is answered"
            )),
            points_acknowledged: reg!(IntCounter::new(
                names::POINTS_ACKNOWLEDGED,
                "Points durably committed to the WAL and acknowledged"
            )),
            points_rejected: reg!(IntCounterVec::new(
                Opts::new(names::POINTS_REJECTED, "Points refused, by reason"),
                &["reason"]
            )),
            points_flushed: reg!(IntCounter::new(
                "points_flushed_total",
                "Points inserted into chDB"
            )),
            points_read_back: reg!(IntCounter::new(
                "flush_points_read_back_total",
                "Points inserted into chDB that the flush read back from the WAL: not kept in memory since their write (over the flush's memory share, or written before a restart)"
            )),
            write_request_points: reg!(HistogramVec::new(
                HistogramOpts::new(
                    names::WRITE_REQUEST_POINTS,
                    "Points accepted per write request, by body format and content encoding"
                )
                .buckets(exponential_buckets(1.0, 4.0, 11).unwrap_or_default()),
                &["format", "encoding"]
            )),
            write_field_values: reg!(IntCounter::new(
                names::WRITE_FIELD_VALUES,
                "Field values of the points accepted (over write_request_points' sum: fields per point)"
            )),
            wal_backlog_bytes: reg!(IntGauge::new(
                names::WAL_BACKLOG_BYTES,
                "Committed WAL bytes not yet flushed to chDB"
            )),
            wal_backlog_points: reg!(IntGauge::new(
                "wal_backlog_points",
                "Committed points not yet flushed to chDB"
            )),
            wal_disk_bytes: reg!(IntGauge::new(
                "wal_disk_bytes",
                "Bytes the WAL's directory takes on disk (live, flushed but not yet compacted, logs)"
            )),
            wal_reclaims: reg!(IntCounter::new(
                "wal_reclaims_total",
                "Compactions run to free the WAL space of flushed entries"
            )),
            data_free_bytes: reg!(IntGauge::new(
                "data_free_bytes",
                "Bytes free on the data volume"
            )),
            wal_oldest_age: reg!(Gauge::new(
                "wal_oldest_unflushed_age_seconds",
                "Age of the oldest committed entry not yet flushed"
            )),
            wal_queue: reg!(IntGauge::new(
                "wal_queue_requests",
                "Requests waiting for the WAL committer"
            )),
            wal_group_requests: reg!(Histogram::with_opts(
                HistogramOpts::new(
                    "wal_group_commit_requests",
                    "Requests made durable by one group commit"
                )
                .buckets(exponential_buckets(1.0, 2.0, 12).unwrap_or_default())
            )),
            flush_lag: reg!(Gauge::new(
                "flush_lag_seconds",
                "Age of the oldest point not yet in chDB (0 when nothing is pending)"
            )),
            flush_failures: reg!(IntCounterVec::new(
                Opts::new("flush_failures_total", "Failed flush attempts (retried)"),
                &["table"]
            )),
            chdb_errors: reg!(IntCounterVec::new(
                Opts::new("chdb_errors_total", "Errors returned by chDB, by operation"),
                &["op"]
            )),
            series_lookups: reg!(IntCounterVec::new(
                Opts::new(
                    "series_lookups_total",
                    "Reads with tag conditions, by where their series came from: remembered, looked_up (read now, and remembered), or in_plan (more than 1,000, or the lookup failed)"
                ),
                &["how"]
            )),
            series_answers: reg!(IntCounterVec::new(
                Opts::new(
                    "series_answers_total",
                    "Reads of the series table alone (SHOW statements, and their shares for a gathering pod), by how they were answered: kept (the series table is unchanged since the same read) or read"
                ),
                &["how"]
            )),
            read_retries: reg!(IntCounterVec::new(
                Opts::new(
                    "read_retries_total",
                    "Reads across the tenant run again, by reason: stale_handoff_view (a hand-off began or moved during the read) or own_share (this pod's share, computed in the gathering query, failed and is read over url() like a peer's)"
                ),
                &["reason"]
            )),
            table_parts: reg!(IntGaugeVec::new(
                Opts::new("table_parts", "Active MergeTree parts per table"),
                &["table"]
            )),
            series: reg!(IntGauge::new(
                names::SERIES,
                "Distinct series known to this server"
            )),
            series_limit: reg!(IntGauge::new(
                "series_limit",
                "Configured series-cardinality limit"
            )),
            ready: reg!(IntGauge::new(
                "ready",
                "1 when the server has replayed its WAL and takes writes"
            )),
            backpressure: reg!(IntCounterVec::new(
                Opts::new(
                    "backpressure_total",
                    "Writes answered 503 because the WAL queue or the flush backlog was full"
                ),
                &["reason"]
            )),
            flush_failing_tables: reg!(IntGauge::new(
                "flush_failing_tables",
                "Tables whose last flush attempt failed (their points wait in the WAL; see /ready)"
            )),
            request_memory_available: reg!(IntGauge::new(
                "request_memory_available_bytes",
                "What is left of limits.request_memory_bytes for request bodies and their parse"
            )),
            requests_in_flight: reg!(IntGauge::new(
                "requests_in_flight",
                "Reads and writes holding a place out of limits.max_requests_in_flight"
            )),
            table_labels: Mutex::new(HashSet::new()),
            registry,
            write_counts: RwLock::new(()),
        }
    }

    /// The label value for `table`: its name for the first [`MAX_TABLE_LABELS`] tables seen,
    /// [`OTHER_TABLES`] after that.
    pub fn table_label(&self, table: &str) -> String {
        let mut seen = self.table_labels.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(table) {
            return table.to_string();
        }
        if seen.len() < MAX_TABLE_LABELS {
            seen.insert(table.to_string());
            return table.to_string();
        }
        OTHER_TABLES.to_string()
    }

    /// The shape of one write's accepted points: how many, with how many field values, in
    /// which body format and encoding.
    pub fn observe_payload(&self, msgpack: bool, gzip: bool, points: usize, field_values: usize) {
        let format = names::FORMATS[usize::from(msgpack)];
        let encoding = if gzip { "gzip" } else { "identity" };
        self.write_request_points
            .with_label_values(&[format, encoding])
            .observe(points as f64);
        self.write_field_values.inc_by(field_values as u64);
    }

    pub fn observe_stage(&self, stage: &str, seconds: f64) {
        self.stage_duration
            .with_label_values(&[stage])
            .observe(seconds);
    }

    /// What became of a write's points (`acked` acknowledged, `invalid` and `over_limit`
    /// rejected) and that its `offered` points were offered, as one step for `/metrics`.
    pub fn count_write(&self, acked: u64, invalid: u64, over_limit: u64, offered: u64) {
        let _one_step = self.write_counts.read().unwrap_or_else(|p| p.into_inner());
        self.points_acknowledged.inc_by(acked);
        for (reason, n) in [("invalid", invalid), ("series_limit", over_limit)] {
            if n > 0 {
                self.points_rejected.with_label_values(&[reason]).inc_by(n);
            }
        }
        self.points_offered.inc_by(offered);
    }

    /// Counts a read across the tenant run again, for `reason` ([`READ_RETRY_STALE_VIEW`],
    /// [`READ_RETRY_OWN_SHARE`]).
    pub fn read_retried(&self, reason: &str) {
        self.read_retries.with_label_values(&[reason]).inc();
    }

    pub fn render(&self) -> Vec<u8> {
        let families = {
            let _between_writes = self.write_counts.write().unwrap_or_else(|p| p.into_inner());
            self.registry.gather()
        };
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&families, &mut buf);
        buf
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_labels_are_capped() {
        let m = Metrics::new();
        for i in 0..MAX_TABLE_LABELS {
            assert_eq!(m.table_label(&format!("t{i}")), format!("t{i}"));
        }
        assert_eq!(m.table_label("one_too_many"), OTHER_TABLES);
        assert_eq!(
            m.table_label("t7"),
            "t7",
            "a table seen before keeps its label"
        );
    }
}
