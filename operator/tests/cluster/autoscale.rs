//! The autoscaler and the calibration against the real API server.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_operator::cancel::cancel_pair;
use sluice_operator::controller::{Context, Options};
use sluice_operator::crd::{IngestTenant, KneeSource};
use sluice_operator::metrics::Metrics;

use crate::harness::*;

/// A pod that falls behind: each scrape adds 100,000 offered points of which 80,000 are
/// acknowledged, and its write requests take 200-400 ms (p95 far over a 100 ms target).
struct FallingBehind {
    scrapes: AtomicU64,
}

impl sluice_operator::autoscale::run::Scrape for FallingBehind {
    fn scrape<'a>(
        &'a self,
        _pod: &'a Pod,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        let n = self.scrapes.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            let requests = 10 * n;
            Ok(format!(
                "sluice_points_offered_total {}\nsluice_points_acknowledged_total {}\nsluice_wal_backlog_bytes {}\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.1024\"}} 0\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.2048\"}} 0\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"0.4096\"}} {requests}\n\
                 sluice_http_request_duration_seconds_bucket{{endpoint=\"write\",le=\"+Inf\"}} {requests}\n",
                100_000 * n,
                80_000 * n,
                1_000_000 * n
            ))
        })
    }
}

#[tokio::test]
async fn autoscaler_adds_a_pod_when_the_pods_fall_behind() {
    with_harness("autoscale", true, |h| {
        Box::pin(async move {
            h.create_tenant(
                "acme",
                json!({
                    "replicas": 1,
                    "scaling": {"minReplicas": 1, "maxReplicas": 3},
                    "autoscaling": {"enabled": true, "p95Target": "100ms",
                                    "calibration": {"enabled": false}},
                    "scheduling": unschedulable()
                }),
            )
            .await;
            // No kubelet runs an unschedulable pod: make acme-0 look Ready, as a running pod is.
            let pods = h.api::<Pod>();
            wait_for("pod acme-0", || async {
                pods.get_opt("acme-0").await.ok().flatten()
            })
            .await;
            pods.patch_status(
                "acme-0",
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {
                    "phase": "Running", "podIP": "10.0.0.1",
                    "conditions": [{"type": "Ready", "status": "True"}]
                }})),
            )
            .await
            .expect("pod status");
            let options = Options {
                namespace: Some(h.ns.clone()),
                instance: format!("test-{}", h.ns),
                ..Options::default()
            };
            let ctx = Context::new(h.client.clone(), Metrics::new().expect("metrics"), options);
            let scraper = Arc::new(FallingBehind {
                scrapes: AtomicU64::new(0),
            });
            let (stop, cancel) = cancel_pair();
            let task = tokio::spawn(sluice_operator::autoscale::run::run(
                ctx,
                scraper,
                Duration::from_millis(300),
                async move { cancel.cancelled().await },
            ));
            let api = h.api::<IngestTenant>();
            // spec.replicas and the status are two writes: wait for both.
            let t = wait_for(
                "spec.replicas 2 and lastScaling from the autoscaler",
                || async {
                    let t = api.get("acme").await.ok()?;
                    let scaled = t.status.as_ref().is_some_and(|s| s.last_scaling.is_some());
                    (t.spec.replicas == 2 && scaled).then_some(t)
                },
            )
            .await;
            stop.cancel();
            let _ = task.await;
            let st = t.status.expect("status");
            let last = st.last_scaling.expect("lastScaling");
            assert_eq!((last.from, last.to), (1, 2));
            // Falling behind at rate R caps the knee at 0.9 R, so the forecast wants
            // ceil(R / (0.9 R x 0.7)) = 2 pods.
            assert_eq!(last.reason, "Forecast");
            assert_eq!(st.p95.as_deref(), Some("410ms"));
            let knee = st.knee.expect("knee");
            assert_eq!(knee.source, Some(KneeSource::Live));
            assert!(knee.measured_at.is_some());
            // Only falling behind was seen: no p95 "at the knee".
            assert_eq!(knee.p95_at_knee, None);
            let knee = knee.points_per_second;
            let rate = st.rate.expect("rate");
            assert!(knee > 0.0 && knee < rate, "knee {knee}, rate {rate}");
            let ev = h.wait_event("acme", "Autoscaled").await;
            let note = ev.note.unwrap_or_default();
            assert!(note.contains("from 1 to 2 replicas: Forecast"), "{note}");
            assert!(note.contains("p95 410 ms"), "{note}");
            // The reconciler follows: the StatefulSet gets the new count.
            let stss = h.api::<StatefulSet>();
            wait_for("StatefulSet replicas 2", || async {
                let s = stss.get("acme").await.ok()?;
                (s.spec?.replicas == Some(2)).then_some(())
            })
            .await;
        })
    })
    .await;
}
