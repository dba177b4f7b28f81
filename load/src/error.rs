//! The generator's errors. Everything a user can get wrong (a flag, a URL, an unreachable
//! server, an unwritable output file) ends up here with the offending value named, so the tool
//! never panics on input.

use std::io;

/// Anything that stops a run before or after the load itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag value that does not parse or is out of range.
    #[error("invalid {what} {value:?}: {why}")]
    Invalid {
        /// Which setting.
        what: &'static str,
        /// The text given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// The target could not be reached when the run started.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The socket error.
        source: io::Error,
    },
    /// The target did not report itself ready in time (`--wait-ready`).
    #[error("{addr} was not ready within {within:?} (last: {last})")]
    NotReady {
        /// `host:port`.
        addr: String,
        /// How long it was given.
        within: std::time::Duration,
        /// Its last answer, or why there was none.
        last: String,
    },
    /// An output file (JSON, SVG) could not be written.
    #[error("cannot write {path}: {source}")]
    Output {
        /// The file.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A payload that cannot be generated as asked (sizes, timestamp width).
    #[error("payload: {0}")]
    Payload(String),
    /// JSON serialisation of the report.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Other I/O (runtime start-up, gzip of the request pool).
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An [`Error::Invalid`] naming the setting, the text given and the reason.
pub fn invalid(what: &'static str, value: &str, why: impl Into<String>) -> Error {
    Error::Invalid {
        what,
        value: value.to_string(),
        why: why.into(),
    }
}
