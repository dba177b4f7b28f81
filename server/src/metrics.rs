//! Prometheus metrics. Names are a contract with the operator's autoscaler, the chart's alert
//! rules and dashboards: change them only together.

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
    pub request_duration: HistogramVec,
    pub requests: IntCounterVec,
    pub stage_duration: HistogramVec,
    pub points_offered: IntCounter,
    pub points_acknowledged: IntCounter,
    pub points_rejected: IntCounterVec,
    pub points_flushed: IntCounter,
    pub wal_backlog_bytes: IntGauge,
    pub wal_backlog_points: IntGauge,
    pub wal_oldest_age: Gauge,
    pub wal_queue: IntGauge,
    pub wal_group_requests: Histogram,
    pub flush_lag: Gauge,
    pub flush_failures: IntCounterVec,
    pub chdb_errors: IntCounterVec,
    pub table_parts: IntGaugeVec,
    pub series: IntGauge,
    pub series_limit: IntGauge,
    pub ready: IntGauge,
    pub backpressure: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("sluice".into()), None)
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
                    "http_request_duration_seconds",
                    "HTTP request latency by endpoint, from first byte read to response"
                )
                .buckets(latency_buckets()),
                &["endpoint"]
            )),
            requests: reg!(IntCounterVec::new(
                Opts::new("http_requests_total", "HTTP requests by endpoint and status code"),
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
                "points_offered_total",
                "Points received in write requests, valid or not"
            )),
            points_acknowledged: reg!(IntCounter::new(
                "points_acknowledged_total",
                "Points durably committed to the WAL and acknowledged"
            )),
            points_rejected: reg!(IntCounterVec::new(
                Opts::new("points_rejected_total", "Points refused, by reason"),
                &["reason"]
            )),
            points_flushed: reg!(IntCounter::new(
                "points_flushed_total",
                "Points inserted into chDB"
            )),
            wal_backlog_bytes: reg!(IntGauge::new(
                "wal_backlog_bytes",
                "Committed WAL bytes not yet flushed to chDB"
            )),
            wal_backlog_points: reg!(IntGauge::new(
                "wal_backlog_points",
                "Committed points not yet flushed to chDB"
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
            table_parts: reg!(IntGaugeVec::new(
                Opts::new("table_parts", "Active MergeTree parts per table"),
                &["table"]
            )),
            series: reg!(IntGauge::new("series", "Distinct series known to this server")),
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
            registry,
        }
    }

    pub fn observe_stage(&self, stage: &str, seconds: f64) {
        self.stage_duration
            .with_label_values(&[stage])
            .observe(seconds);
    }

    pub fn render(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        buf
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
