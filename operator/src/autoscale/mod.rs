//! The knee autoscaler's pure core: what a pod's knee is, from calibration and from live
//! windows ([`estimate`]), and how many replicas a tenant needs ([`decide`]). No Kubernetes,
//! no clocks, no I/O: time is seconds passed in, so every rule is unit-tested on synthetic load
//! curves. Scraping the pods and writing `spec.replicas` and the status are the reconciler's.
//!
//! The rule for "a pod keeps up at this rate" is the load generator's knee rule
//! ([`sluice_core::knee`]): at least 99 % acknowledged, nothing dropped, p95 bounded.

pub mod decide;
pub mod estimate;
pub mod scrape;
