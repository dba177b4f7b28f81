//! `sluice-load`: an open-model load generator for InfluxDB-compatible `/write` endpoints.
//!
//! It exists to measure write paths the way an autoscaler sees them: a constant arrival rate
//! the target does not control (so saturation shows as latency, drops and a shortfall in
//! achieved rate instead of silently slower clients), stepped up until the *knee*. See
//! `load/README.md` for usage; the modules are ordered from pure rules to I/O:
//! [`units`] (flag parsing), [`hist`] (percentiles), [`knee`] (the rules),
//! [`payload`] (pre-encoded bodies), [`http`] (request heads, response framing),
//! [`search`] (the knee search's next rate), [`step`] (the dispatcher of one step),
//! [`conn`] (connections), [`engine`] (runs a plan), [`ready`] (waiting for the target),
//! [`report`] and [`svg`] (output).

mod conn;
pub mod engine;
pub mod error;
pub mod hist;
pub mod http;
pub mod knee;
pub mod payload;
pub mod ready;
pub mod report;
pub mod search;
mod step;
pub mod svg;
pub mod units;

pub use engine::{run, LoadConfig, Plan};
pub use error::{Error, Result};
