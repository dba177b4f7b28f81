//! `sluice-load`: an open-model load generator for InfluxDB-compatible `/write` endpoints.
//!
//! It exists to measure write paths the way an autoscaler sees them: a constant arrival rate
//! the target does not control (so saturation shows as latency, drops and a shortfall in
//! achieved rate instead of silently slower clients), stepped up until the *knee*. See
//! `load/README.md` for usage; the modules are ordered from pure rules to I/O:
//! [`units`] (flag parsing), [`hist`] (percentiles), [`knee`] (the rules),
//! [`payload`] (pre-encoded bodies), [`http`] (request heads, response framing),
//! [`engine`] (dispatcher and connections), [`report`] and [`svg`] (output).

pub mod engine;
pub mod error;
pub mod hist;
pub mod http;
pub mod knee;
pub mod payload;
pub mod report;
pub mod svg;
pub mod units;

pub use engine::{run, LoadConfig, Plan};
pub use error::{Error, Result};
