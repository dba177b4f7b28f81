//! Leader election, and the binary itself leading, reconciling and shutting down.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;
use sluice_operator::cancel::cancel_pair;
use sluice_operator::crd::Phase;
use sluice_operator::leader::{LeaderElector, LeaseConfig};

use crate::harness::*;

#[tokio::test]
async fn only_one_replica_holds_the_lease_and_release_hands_over() {
    with_harness("lease", false, |h| {
        Box::pin(async move {
            let cfg = |id: &str| LeaseConfig {
                lease_duration: Duration::from_secs(3),
                renew_deadline: Duration::from_secs(2),
                retry_period: Duration::from_millis(300),
                ..LeaseConfig::new("sluice-operator", h.ns.clone(), id)
            };
            let a = LeaderElector::new(h.client.clone(), cfg("a"));
            let b = LeaderElector::new(h.client.clone(), cfg("b"));
            assert!(
                a.try_acquire_or_renew().await.expect("a"),
                "a creates the Lease"
            );
            assert!(
                !b.try_acquire_or_renew().await.expect("b"),
                "b must not lead while a renews"
            );
            assert!(a.try_acquire_or_renew().await.expect("a renews"));
            assert!(!b.try_acquire_or_renew().await.expect("b"));
            let leases = h.api::<Lease>();
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref()),
                Some("a")
            );

            // A stops renewing (crashed): B takes over only after a full lease duration.
            let start = Instant::now();
            let (_t, never) = cancel_pair();
            assert!(b.acquire(&never).await);
            assert!(
                start.elapsed() >= Duration::from_secs(3),
                "took over after {:?}",
                start.elapsed()
            );
            assert!(
                !a.try_acquire_or_renew().await.expect("a"),
                "the old leader must not come back"
            );
            let lease = leases.get("sluice-operator").await.expect("lease");
            let spec = lease.spec.expect("spec");
            assert_eq!(spec.holder_identity.as_deref(), Some("b"));
            assert_eq!(spec.lease_transitions, Some(1));

            // B shuts down gracefully: A takes over at once.
            b.release().await.expect("release");
            assert!(
                a.try_acquire_or_renew().await.expect("a"),
                "a released Lease is free at once"
            );
        })
    })
    .await;
}

/// The binary itself, out of cluster with a kubeconfig: /health, /metrics, the Lease, a
/// reconcile, and a graceful SIGTERM that releases the Lease.
#[tokio::test]
async fn operator_binary_leads_reconciles_and_shuts_down_gracefully() {
    with_harness("binary", false, |h| {
        Box::pin(async move {
            let Some(kubeconfig) = std::env::var_os(ENV) else {
                return;
            };
            let port = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
                l.local_addr().expect("addr").port()
            };
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-operator"))
                .env("KUBECONFIG", &kubeconfig)
                .env("SLUICE_LOG", "warn")
                .args([
                    "--namespace",
                    &h.ns,
                    "--lease-namespace",
                    &h.ns,
                    "--identity",
                    "binary-test",
                ])
                .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .expect("start sluice-operator");
            let get = |path: &'static str| async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()?;
                s.write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .ok()?;
                let mut out = String::new();
                s.read_to_string(&mut out).await.ok()?;
                Some(out)
            };
            let health = wait_for("/health", || get("/health")).await;
            assert!(health.starts_with("HTTP/1.1 200"), "{health}");
            wait_for("the binary to lead", || async {
                get("/metrics")
                    .await
                    .filter(|m| m.contains("sluice_operator_leader 1"))
            })
            .await;
            let leases = h.api::<Lease>();
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease.spec.and_then(|s| s.holder_identity).as_deref(),
                Some("binary-test")
            );

            h.create_tenant("acme", json!({"replicas": 0})).await;
            h.wait_status("acme", "Stopped", |t| {
                t.status
                    .as_ref()
                    .is_some_and(|s| s.phase == Some(Phase::Stopped))
            })
            .await;
            let metrics = get("/metrics").await.expect("metrics");
            assert!(
                metrics.contains("sluice_operator_reconcile_duration_seconds_count"),
                "{metrics}"
            );
            assert!(
                metrics.contains(
                    "sluice_operator_applies_total{kind=\"StatefulSet\",outcome=\"created\"} 1"
                ),
                "{metrics}"
            );

            let status = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill");
            assert!(status.success());
            let start = Instant::now();
            let code = loop {
                if let Some(code) = child.try_wait().expect("wait") {
                    break code;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "operator did not stop on SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert!(code.success(), "graceful shutdown exits 0, got {code}");
            let lease = leases.get("sluice-operator").await.expect("lease");
            assert_eq!(
                lease.spec.and_then(|s| s.holder_identity),
                None,
                "the Lease is released on shutdown"
            );
            // Its tenant still needs its finalizer run: the harness's controller does that.
        })
    })
    .await;
}
