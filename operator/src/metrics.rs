//! Prometheus metrics of the operator, served on `/metrics`.
//!
//! Labels are bounded (error kinds, object kinds, outcomes), never tenant names: a cluster with
//! thousands of tenants must not give the scraper thousands of series per metric.

use std::time::Instant;

use prometheus::{
    GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

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
    /// The autoscaler's knee estimate per pod, points/s, by tenant.
    pub autoscaler_knee: GaugeVec,
    /// Points/s offered to the tenant's Ready pods, by tenant.
    pub autoscaler_offered: GaugeVec,
    /// The highest p95 write latency of the tenant's pods, seconds, by tenant.
    pub autoscaler_p95: GaugeVec,
    /// The autoscaler's replica count, by tenant.
    pub autoscaler_desired: GaugeVec,
    /// Decisions by reason (`decide::Reason`).
    pub autoscaler_decisions: IntCounterVec,
    /// 1 while the autoscaler wants more replicas than `scaling.maxReplicas` allows, by tenant.
    pub autoscaler_at_max: GaugeVec,
    /// The tenant's `autoscaling.p95Target`, seconds, by tenant.
    pub autoscaler_p95_target: GaugeVec,
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
        let by_tenant = |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &["tenant"]);
        let autoscaler_knee = by_tenant(
            "autoscaler_knee_points_per_second",
            "Estimated knee per pod (points/s)",
        )?;
        let autoscaler_offered = by_tenant(
            "autoscaler_offered_points_per_second",
            "Points/s offered to the tenant's Ready pods",
        )?;
        let autoscaler_p95 = by_tenant(
            "autoscaler_p95_seconds",
            "Highest p95 write latency among the tenant's pods",
        )?;
        let autoscaler_desired = by_tenant(
            "autoscaler_desired_replicas",
            "Replicas the autoscaler decided",
        )?;
        let autoscaler_at_max = by_tenant(
            "autoscaler_at_max",
            "1 while more replicas are wanted than scaling.maxReplicas allows",
        )?;
        let autoscaler_p95_target = by_tenant(
            "autoscaler_p95_target_seconds",
            "The tenant's autoscaling.p95Target",
        )?;
        let autoscaler_decisions = IntCounterVec::new(
            Opts::new(
                "autoscaler_decisions_total",
                "Autoscaler decisions by reason",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(failures.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(applies.clone()))?;
        registry.register(Box::new(status_writes.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(autoscaler_knee.clone()))?;
        registry.register(Box::new(autoscaler_offered.clone()))?;
        registry.register(Box::new(autoscaler_p95.clone()))?;
        registry.register(Box::new(autoscaler_desired.clone()))?;
        registry.register(Box::new(autoscaler_decisions.clone()))?;
        registry.register(Box::new(autoscaler_at_max.clone()))?;
        registry.register(Box::new(autoscaler_p95_target.clone()))?;
        Ok(Self {
            registry,
            reconciles,
            failures,
            duration,
            applies,
            status_writes,
            leader,
            autoscaler_knee,
            autoscaler_offered,
            autoscaler_p95,
            autoscaler_desired,
            autoscaler_decisions,
            autoscaler_at_max,
            autoscaler_p95_target,
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
