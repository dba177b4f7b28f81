//! `sluice-operator`: runs sluice tenants on Kubernetes.
//!
//! A reconcile is staged (after Stackable's operators): [`validate`] turns an
//! [`crd::IngestTenant`] into a [`validate::ValidTenant`] (or a precise refusal),
//! [`builders`] turn that into Kubernetes objects with pure functions, [`controller`] applies
//! them with server-side apply and writes the status computed by [`status`]. [`leader`] keeps
//! several operator replicas from acting at once. [`autoscale`] is the knee autoscaler:
//! pure rules (estimating a pod's knee, deciding replicas) and the loop that runs them.
//! [`decommission`] is the reconciler's scale-down stage: a pod hands its data to a pod that
//! stays before the StatefulSet shrinks. [`calibration`] is its stage that measures one pod's
//! knee with a scratch pod when what sets the pods' capacity changes.
//!
//! The operator depends on `sluice-core` for the server's configuration schema and never on
//! `sluice-server`: it must not link chDB.

pub mod autoscale;
pub mod builders;
pub mod calibration;
pub mod cancel;
pub mod controller;
pub mod crd;
pub mod decommission;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod pod_http;
pub mod status;
#[cfg(test)]
mod testing;
pub mod validate;
