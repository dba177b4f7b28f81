//! Prometheus metrics of the operator, served on `/metrics`.
//!
//! Labels are bounded (error kinds, object kinds, outcomes), never tenant names: a cluster with
//! thousands of tenants must not give the scraper thousands of series per metric.

use std::time::Instant;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// Reconciles started (apply and cleanup).
    pub reconciles: IntCounter,
    /// Failed reconciles by error kind (`Error::metric_label`).
    pub failures: IntCounterVec,
    /// Reconcile wall time.
    pub duration: Histogram,
    /// Server-side applies by object kind and outcome (created, updated, unchanged).
    pub applies: IntCounterVec,
    /// Tenant status writes (only when the status changed).
    pub status_writes: IntCounter,
    /// 1 while this replica holds the leader Lease.
    pub leader: IntGauge,
}

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new_custom(Some("sluice_operator".into()), None)?;
        let reconciles = IntCounter::new("reconciles_total", "Reconciles started")?;
        let failures = IntCounterVec::new(
            Opts::new("reconcile_errors_total", "Failed reconciles by error kind"),
            &["error"],
        )?;
        let duration = Histogram::with_opts(
            HistogramOpts::new("reconcile_duration_seconds", "Reconcile duration")
                .buckets(vec![0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )?;
        let applies = IntCounterVec::new(
            Opts::new(
                "applies_total",
                "Server-side applies by object kind and outcome (created, updated, unchanged)",
            ),
            &["kind", "outcome"],
        )?;
        let status_writes = IntCounter::new("status_writes_total", "Tenant status updates")?;
        let leader = IntGauge::new("leader", "1 while this replica holds the leader Lease")?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(applies.clone()))?;
        registry.register(Box::new(status_writes.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        Ok(Self {
            registry,
            reconciles,
            failures,
            duration,
            applies,
            status_writes,
            leader,
        })
    }

    /// Counts a reconcile and measures it until the returned guard drops.
    pub fn reconcile_timer(&self) -> ReconcileTimer {
        self.reconciles.inc();
        ReconcileTimer {
            start: Instant::now(),
            histogram: self.duration.clone(),
        }
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let encoder = prometheus::TextEncoder::new();
        if let Err(e) = encoder.encode_utf8(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "cannot encode metrics");
        }
        out
    }
}

pub struct ReconcileTimer {
    start: Instant,
    histogram: Histogram,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_with_prefix() {
        let m = Metrics::new().unwrap();
        drop(m.reconcile_timer());
        m.failures.with_label_values(&["Conflict"]).inc();
        let text = m.render();
        assert!(
            text.contains("sluice_operator_reconciles_total 1"),
            "{text}"
        );
        assert!(
            text.contains("sluice_operator_reconcile_errors_total{error=\"Conflict\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sluice_operator_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }
}
