//! Connections on the engine's one data path, each used by one thread at a time, and how a
//! read runs on one.

use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;

use super::{EngineError, QueryError, ReadSettings};

/// Connections on the engine's one data path, each used by one thread at a time.
pub(super) struct Pool {
    idle: Mutex<Vec<Connection>>,
    available: Condvar,
    /// What each connection was opened with, to open a replacement.
    args: Vec<String>,
}

impl Pool {
    pub(super) fn open(
        arg: &str,
        extra: &[&str],
        n: usize,
        path: &Path,
    ) -> Result<Self, EngineError> {
        let mut args = vec![arg];
        args.extend_from_slice(extra);
        let mut idle = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let c = Connection::open(&args).map_err(|source| EngineError::Open {
                path: path.display().to_string(),
                source,
            })?;
            idle.push(c);
        }
        Ok(Self {
            idle: Mutex::new(idle),
            available: Condvar::new(),
            args: args.iter().map(|a| a.to_string()).collect(),
        })
    }

    /// A connection opened like the pool's with `extra`'s settings, set before its read-only
    /// mode (which would refuse them), each in place of the pool's value of that setting.
    pub(super) fn open_with(
        &self,
        extra: &ReadSettings,
        threads_free_memory: u64,
    ) -> Result<Connection, QueryError> {
        let extra = extra.args(threads_free_memory);
        let key = |a: &str| a.split_once('=').map_or(a, |(k, _)| k).to_string();
        let replaced: Vec<String> = extra.iter().map(|a| key(a)).collect();
        let (readonly, mut args): (Vec<String>, Vec<String>) = self
            .args
            .iter()
            .filter(|a| !replaced.contains(&key(a)))
            .cloned()
            .partition(|a| a.starts_with("--readonly="));
        args.extend(extra);
        args.extend(readonly);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Connection::open(&args)
            .map_err(|e| QueryError::Engine(format!("opening a connection for a read: {e}")))
    }

    /// Blocks until a connection is free.
    pub(super) fn lease(&self) -> Lease<'_> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(c) = idle.pop() {
                return Lease {
                    pool: self,
                    conn: Some(c),
                };
            }
            idle = self.available.wait(idle).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A free connection, waiting at most `wait` for one.
    pub(super) fn lease_within(&self, wait: Duration) -> Option<Lease<'_>> {
        let deadline = Instant::now() + wait;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(c) = idle.pop() {
                return Some(Lease {
                    pool: self,
                    conn: Some(c),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            idle = self
                .available
                .wait_timeout(idle, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A connection checked out of a pool; it goes back when dropped.
pub struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
}

impl std::ops::Deref for Lease<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
            .as_ref()
            .expect("lease holds a connection until dropped")
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("lease holds a connection until dropped")
    }
}

impl Lease<'_> {
    /// Closes this connection and puts a fresh one in its place: a stream that ended early
    /// (an error midway, or a client that went away) can leave output behind that the next
    /// query on the same connection would read as its own.
    pub(super) fn replace(&mut self) {
        let args: Vec<&str> = self.pool.args.iter().map(String::as_str).collect();
        match Connection::open(&args) {
            Ok(fresh) => self.conn = Some(fresh),
            Err(e) => {
                // Keep the old one rather than shrink the pool.
                tracing::error!(error = %e, "cannot reopen a query connection");
            }
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            if let Ok(mut idle) = self.pool.idle.lock() {
                idle.push(c);
            }
            self.pool.available.notify_one();
        }
    }
}

/// Runs `sql` on `conn`, handing its output to `sink` chunk by chunk (whole when not
/// `streamed`); also says whether it ran to its end (a stream stopped early can leave output
/// behind on the connection).
pub(super) fn run_stream(
    conn: &mut Connection,
    sql: &str,
    streamed: bool,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> (Result<(), QueryError>, bool) {
    if !streamed {
        let r = crate::priority::keep(|| conn.query(sql, OutputFormat::JSON))
            .map_err(|e| QueryError::Engine(e.to_string()));
        return match r {
            Ok(r) => {
                sink(r.data_ref().to_vec());
                (Ok(()), true)
            }
            Err(e) => (Err(e), true),
        };
    }
    let mut finished = false;
    let result = crate::priority::keep(|| {
        let mut delivered = false;
        {
            let mut stream = conn
                .query_stream(sql, OutputFormat::JSON)
                .map_err(|e| QueryError::Engine(e.to_string()))?;
            while let Some(chunk) = stream
                .next_chunk()
                .map_err(|e| QueryError::Engine(e.to_string()))?
            {
                if chunk.data_ref().is_empty() {
                    continue;
                }
                delivered = true;
                if !sink(chunk.data_ref().to_vec()) {
                    return Ok(());
                }
            }
        }
        if !delivered {
            // An empty result's whole output (a JSON document with `"rows": 0`, a
            // `TSVWithNames` header) comes in the stream's last chunk, which chdb-rust's
            // iterator drops: it takes a chunk that read no rows for the end. Without this a
            // query with no rows answered 200 with an empty body, which no client parses.
            // The second run costs as much as the first, but only for an empty result.
            let r = conn
                .query(sql, OutputFormat::JSON)
                .map_err(|e| QueryError::Engine(e.to_string()))?;
            if !r.data_ref().is_empty() && !sink(r.data_ref().to_vec()) {
                return Ok(());
            }
        }
        finished = true;
        Ok(())
    });
    (result, finished)
}
