//! The knee rule lives in `sluice-core` ([`sluice_core::knee`]) so that the load generator,
//! the server and the operator's autoscaler judge a rate by the same rule.

pub use sluice_core::knee::*;
