//! Integration tests against a real kube-apiserver (localkube: etcd, API server, controller
//! manager, scheduler, kubelet), never a mock.
//!
//! `SLUICE_TEST_KUBECONFIG` names the cluster's kubeconfig (`scripts/test` sets it after
//! `localkube up`). Unset, every test prints a notice and passes (plain `cargo test` on a dev
//! box); set but unreachable, every test fails.
//!
//! Each test runs in its own namespace with its own in-process controller watching only that
//! namespace, so tests run in parallel without seeing each other, and deletes what it created
//! (tenants first, while its controller still runs their finalizers, then the namespace).
//! Nothing needs the server image: pods may never start, and the tests assert on API objects,
//! status and Events.

mod autoscale;
mod calibration;
mod harness;
mod idempotence;
mod leader;
mod lifecycle;
mod objects;
mod scaling;
mod validation;
