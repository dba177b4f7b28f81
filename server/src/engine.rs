//! The embedded chDB engine: one data path per process, a pool of connections on it.
//!
//! Flush workers insert Arrow batches and queries read through the same pool. Connections are
//! `Send` but not `Sync`, so each is used by one thread at a time, checked out of the pool.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use chdb_rust::arrow::array::{RecordBatch, StructArray};
use chdb_rust::arrow::ffi::{to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use chdb_rust::arrow_stream::{arrow_stream_table_sql, ArrowArray, ArrowSchema};
use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;
use sluice_core::config::QueryConfig;
use sluice_core::names::{quote_ident, quote_str};

/// The engine release this build is made for: the npm package `@chdb/lib-linux-x64-gnu`
/// `26.7.3-stable.1` reports `26.7.3`.
pub const EXPECTED_ENGINE_VERSION: &str = "26.7.3";

/// The environment variable that configures chDB's own allocator (the jemalloc linked into
/// libchdb, with its `je_` prefix), and the value the server runs with unless it is set.
///
/// chDB builds jemalloc to hand freed pages back to the kernel after 5 s (dirty) and at once
/// (muzzy). Every flush allocates and frees the insert's column buffers, so the pages were
/// faulted in and zeroed again on each one: about a third of chDB's insert CPU (126-148 ns per
/// point at 1 M points/s, 93-98 with this). Keeping them 20 s costs about the buffers of a few
/// inserts in resident memory. `prof_active:false` stops the allocation sampling chDB's build
/// turns on (its profiler output is not collected anywhere here).
///
/// jemalloc reads this once, while libchdb loads (before `main`), so `sluice-server`
/// re-executes itself with it set (see its `main`).
pub const CHDB_MALLOC_CONF: (&str, &str) = (
    "JE_MALLOC_CONF",
    "dirty_decay_ms:20000,muzzy_decay_ms:20000,prof_active:false",
);

/// [`CHDB_MALLOC_CONF`]'s value under a small memory limit: freed pages go back after 1 s, so
/// the buffers of twenty seconds of inserts are not held on top of everything else (under a
/// 512 MiB limit the kernel killed the server at 600,000 points/s with the 20 s decay).
pub const CHDB_MALLOC_CONF_SMALL: &str = "dirty_decay_ms:1000,muzzy_decay_ms:0,prof_active:false";

/// Memory budgets below this use [`CHDB_MALLOC_CONF_SMALL`].
pub const SMALL_MEMORY_LIMIT: u64 = 1 << 30;

/// chDB's allocator settings for a process with a budget of `budget` bytes.
pub fn chdb_malloc_conf(budget: u64) -> &'static str {
    if budget < SMALL_MEMORY_LIMIT {
        CHDB_MALLOC_CONF_SMALL
    } else {
        CHDB_MALLOC_CONF.1
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("libchdb reports version {found}, but sluice is built for {EXPECTED_ENGINE_VERSION}: install the matching library with scripts/setup")]
    WrongVersion { found: String },
    #[error("cannot read the libchdb version: {0}")]
    NoVersion(String),
    #[error("cannot open chDB at {path}: {source}")]
    Open {
        path: String,
        source: chdb_rust::error::Error,
    },
    #[error("{0}")]
    Query(String),
    #[error("cannot pass the Arrow batch to chDB: {0}")]
    Arrow(String),
}

impl From<chdb_rust::error::Error> for EngineError {
    fn from(e: chdb_rust::error::Error) -> Self {
        EngineError::Query(e.to_string())
    }
}

/// Connections on the engine's one data path, each used by one thread at a time.
struct Pool {
    idle: Mutex<Vec<Connection>>,
    available: Condvar,
    /// What each connection was opened with, to open a replacement.
    args: Vec<String>,
}

impl Pool {
    fn open(arg: &str, extra: &[&str], n: usize, path: &Path) -> Result<Self, EngineError> {
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
    /// mode (which would refuse them).
    fn open_with(&self, extra: &ReadSettings) -> Result<Connection, chdb_rust::error::Error> {
        let (readonly, mut args): (Vec<String>, Vec<String>) = self
            .args
            .iter()
            .cloned()
            .partition(|a| a.starts_with("--readonly="));
        args.extend(extra.args());
        args.extend(readonly);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Connection::open(&args)
    }

    /// Blocks until a connection is free.
    fn lease(&self) -> Lease<'_> {
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
    fn lease_within(&self, wait: Duration) -> Option<Lease<'_>> {
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

/// Why a client's query did not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("all {0} query connections are busy; retry")]
    Busy(usize),
    #[error("{0}")]
    Engine(String),
}

/// Writers (flush, DDL) and readers (`/sql`) use separate pools: a long query never holds up a
/// flush, and reader connections are opened `readonly = 1`, so nothing a reader sends can write
/// or change a setting.
pub struct Engine {
    writers: Pool,
    readers: Pool,
    reader_count: usize,
    /// Connections for reads that gather from the tenant's pods (see [`Engine::with_gatherers`]);
    /// none on a pod that answers alone.
    gatherers: Option<Pool>,
    /// `--path=...`, for pools opened later.
    path_arg: String,
    path: std::path::PathBuf,
    version: String,
    stream_seq: AtomicU64,
}

/// Settings one read needs beyond its pool's. A read-only connection takes no settings from
/// its queries, so a read with any of these runs on a connection of its own opened with them
/// (under a quarter of a millisecond), after waiting for a place in its pool like any read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSettings {
    /// A ClickHouse map literal of table name to condition (`additional_table_filters`),
    /// applied to every read of those tables however the query names them.
    pub table_filters: Option<String>,
    /// `optimize_aggregation_in_order`: a `GROUP BY` on the tables' leading key column
    /// (`series_id`) aggregates each series as its rows stream by in key order instead of
    /// through a hash table. For the last point of every series it is 12 times faster (the
    /// hash path copies `argMax`'s tuple key for every row, as time only grows); with time
    /// buckets in the key it is 4 times slower, so only the plans that gain ask for it.
    pub aggregation_in_order: bool,
}

impl ReadSettings {
    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(f) = &self.table_filters {
            args.push(format!("--additional_table_filters={f}"));
        }
        if self.aggregation_in_order {
            args.push("--optimize_aggregation_in_order=1".into());
        }
        args
    }
}

/// Which pool a client's query runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// This pod's data only: `/sql`, a pod's InfluxQL, the partials a pod computes for a peer.
    Local,
    /// Queries that read the partials of the tenant's pods through `url()`.
    Gather,
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
    fn replace(&mut self) {
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

/// Checks the linked library before anything else touches it, so a wrong library fails with
/// a message instead of an obscure engine error later.
pub fn check_library_version() -> Result<String, EngineError> {
    let v = chdb_rust::version::engine_version()
        .map_err(|e| EngineError::NoVersion(e.to_string()))?
        .to_string();
    if !version_matches(&v) {
        return Err(EngineError::WrongVersion { found: v });
    }
    Ok(v)
}

/// `26.7.3` and its patch builds (`26.7.3.x`) are the engine this build's header and SQL were
/// written against; anything else is refused at start-up.
fn version_matches(found: &str) -> bool {
    found == EXPECTED_ENGINE_VERSION
        || found
            .strip_prefix(EXPECTED_ENGINE_VERSION)
            .is_some_and(|rest| rest.starts_with('.'))
}

impl Engine {
    /// Opens `writers` read-write and `readers` read-only connections on `path` (created if
    /// missing); every reader runs its queries under `reader_limits` (see [`reader_settings`]).
    pub fn open(
        path: &Path,
        writers: usize,
        readers: usize,
        reader_limits: &QueryConfig,
    ) -> Result<Self, EngineError> {
        Self::open_within(path, writers, readers, reader_limits, None)
    }

    /// [`Engine::open`] with the engine's own allocations (inserts, merges, queries, caches)
    /// limited to `memory_bytes`: past it the engine fails the allocation's insert, merge or
    /// query (an insert is retried from the WAL) instead of the kernel killing the process.
    /// chDB otherwise allows itself 90 % of the cgroup's limit, as if nothing else were in the
    /// process.
    pub fn open_within(
        path: &Path,
        writers: usize,
        readers: usize,
        reader_limits: &QueryConfig,
        memory_bytes: Option<u64>,
    ) -> Result<Self, EngineError> {
        let version = check_library_version()?;
        // chDB would otherwise install handlers for SIGTERM/SIGINT and friends; the server
        // handles its own signals so that shutdown can drain the WAL.
        chdb_rust::runtime::signal_handlers(false);
        std::fs::create_dir_all(path).map_err(|e| EngineError::Open {
            path: path.display().to_string(),
            source: e.into(),
        })?;
        let arg = format!("--path={}", path.display());
        let memory = memory_bytes.map(|b| format!("--max_server_memory_usage={b}"));
        let mut writer_args: Vec<&str> = vec![MERGE_NICE];
        writer_args.extend(memory.as_deref());
        let settings = reader_settings(reader_limits);
        let mut reader_args = writer_args.clone();
        reader_args.extend(settings.iter().map(String::as_str));
        Ok(Self {
            writers: Pool::open(&arg, &writer_args, writers, path)?,
            readers: Pool::open(&arg, &reader_args, readers, path)?,
            reader_count: readers.max(1),
            gatherers: None,
            path_arg: arg.clone(),
            path: path.to_path_buf(),
            version,
            stream_seq: AtomicU64::new(0),
        })
    }

    /// Adds `n` connections for reads that gather from the tenant's pods. They need `url()`,
    /// which `readonly = 1` refuses, so they are opened `readonly = 2` (reads, and settings
    /// per query); only SQL the server plans runs on them, and a client's part of it (`/sql`'s
    /// outer query) passes the same guard, which refuses `SETTINGS` and `url()`. Peers are
    /// fetched without a HEAD first (it would run a peer's query twice), a 404 is an error,
    /// and a peer gets one try within the timeouts.
    pub fn with_gatherers(
        mut self,
        n: usize,
        reader_limits: &QueryConfig,
        connect_timeout: Duration,
        receive_timeout: Duration,
    ) -> Result<Self, EngineError> {
        let mut args: Vec<String> = vec![MERGE_NICE.to_string()];
        args.extend(
            reader_settings(reader_limits)
                .into_iter()
                .filter(|a| !a.starts_with("--readonly=")),
        );
        args.extend(gather_settings(connect_timeout, receive_timeout));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.gatherers = Some(Pool::open(&self.path_arg, &args, n, &self.path)?);
        Ok(self)
    }

    pub fn gathers(&self) -> bool {
        self.gatherers.is_some()
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    fn lease(&self) -> Lease<'_> {
        self.writers.lease()
    }

    /// Runs a client's query on a read-only connection (waiting at most `wait` for one) and
    /// hands its output to `sink` chunk by chunk as the engine produces it; JSON unless the
    /// query says `FORMAT`. `sink` returns false to stop the query (the client is gone).
    /// The engine streams only `SELECT`s; other statements (`SHOW`, `DESCRIBE`, `EXISTS`,
    /// small by nature) run whole with `streamed` false and are handed over in one chunk.
    pub fn stream_query(
        &self,
        sql: &str,
        streamed: bool,
        wait: Duration,
        sink: &mut dyn FnMut(Vec<u8>) -> bool,
    ) -> Result<(), QueryError> {
        self.stream_on(Readers::Local, sql, streamed, wait, sink)
    }

    /// [`Engine::stream_query`] on the pool `readers` names.
    pub fn stream_on(
        &self,
        readers: Readers,
        sql: &str,
        streamed: bool,
        wait: Duration,
        sink: &mut dyn FnMut(Vec<u8>) -> bool,
    ) -> Result<(), QueryError> {
        self.stream_with(readers, &ReadSettings::default(), sql, streamed, wait, sink)
    }

    /// [`Engine::stream_on`] with `settings` beyond the pool's (see [`ReadSettings`]).
    pub fn stream_with(
        &self,
        readers: Readers,
        settings: &ReadSettings,
        sql: &str,
        streamed: bool,
        wait: Duration,
        sink: &mut dyn FnMut(Vec<u8>) -> bool,
    ) -> Result<(), QueryError> {
        let pool = match readers {
            Readers::Local => &self.readers,
            Readers::Gather => self
                .gatherers
                .as_ref()
                .ok_or_else(|| QueryError::Engine("this pod does not gather reads".into()))?,
        };
        let mut lease = pool
            .lease_within(wait)
            .ok_or(QueryError::Busy(self.reader_count))?;
        if *settings == ReadSettings::default() {
            let (result, finished) = run_stream(&mut lease, sql, streamed, sink);
            if !finished {
                lease.replace();
            }
            return result;
        }
        let mut own = pool
            .open_with(settings)
            .map_err(|e| QueryError::Engine(format!("opening a connection for a read: {e}")))?;
        run_stream(&mut own, sql, streamed, sink).0
    }

    /// The engine's own parse of `sql` (`EXPLAIN AST`), one node per line, on a read-only
    /// connection: what [`crate::sql_guard`] checks before a client's query runs.
    pub fn explain_ast(&self, sql: &str, wait: Duration) -> Result<String, QueryError> {
        let conn = self
            .readers
            .lease_within(wait)
            .ok_or(QueryError::Busy(self.reader_count))?;
        let r = conn
            .query(&format!("EXPLAIN AST {sql}"), OutputFormat::TabSeparated)
            .map_err(|e| QueryError::Engine(e.to_string()))?;
        Ok(String::from_utf8_lossy(r.data_ref()).into_owned())
    }

    /// Runs `sql`; the output is in `format` unless the statement has its own FORMAT clause.
    pub fn query(&self, sql: &str, format: OutputFormat) -> Result<Vec<u8>, EngineError> {
        let conn = self.lease();
        let r = conn.query(sql, format)?;
        Ok(r.data_ref().to_vec())
    }

    /// Runs a statement whose output does not matter (DDL).
    pub fn execute(&self, sql: &str) -> Result<(), EngineError> {
        let conn = self.lease();
        conn.query(sql, OutputFormat::TabSeparated)?;
        Ok(())
    }

    /// Inserts `batch` into `table` as one part, mapping columns by name (materialized columns included).
    /// With `Some(token)`, inserting the same token again within the table's deduplication
    /// window adds nothing; `None` inserts unconditionally (recovery, which has checked what
    /// the table already holds).
    pub fn insert(
        &self,
        table: &str,
        batch: RecordBatch,
        dedup_token: Option<&str>,
    ) -> Result<(), EngineError> {
        let columns: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| quote_ident(f.name()))
            .collect();
        let struct_array = StructArray::from(batch);
        let (ffi_array, ffi_schema): (FFI_ArrowArray, FFI_ArrowSchema) =
            to_ffi(&struct_array.into()).map_err(|e| EngineError::Arrow(e.to_string()))?;
        // SAFETY: both FFI structs live on this stack frame until after unregistration below,
        // which is as long as chDB may read them.
        let schema = unsafe { ArrowSchema::from_raw(&ffi_schema as *const _ as *mut _) };
        let array = unsafe { ArrowArray::from_raw(&ffi_array as *const _ as *mut _) };
        let name = format!(
            "sluice_flush_{}_{}",
            std::process::id(),
            self.stream_seq.fetch_add(1, Ordering::Relaxed)
        );
        let conn = self.lease();
        conn.register_arrow_array(&name, &schema, &array)?;
        let dedup = match dedup_token {
            Some(token) => format!(
                "insert_deduplicate = 1, insert_deduplication_token = {}",
                quote_str(token)
            ),
            None => "insert_deduplicate = 0".to_string(),
        };
        // The insert's pipeline threads run below the request path, like the flush worker.
        let sql = format!(
            "INSERT INTO {} ({}) SELECT * FROM {} SETTINGS insert_allow_materialized_columns = 1, {WHOLE_INSERT}, os_threads_nice_value_query = {}, {dedup}",
            quote_ident(table),
            columns.join(", "),
            arrow_stream_table_sql(&name),
            crate::flush::FLUSH_NICE,
        );
        // chDB sets the thread's nice value back to 0 after a query run with
        // `os_threads_nice_value_query`.
        let result = crate::priority::keep(|| conn.query(&sql, OutputFormat::Null));
        let unregistered = conn.unregister_arrow_table(&name);
        drop(ffi_array);
        drop(ffi_schema);
        result?;
        unregistered?;
        Ok(())
    }
}

/// Settings every read-only connection runs its queries with: the per-query limits of
/// `[query]`, errors instead of silently cut results, and the priority of the request path's
/// background work, so that many slow queries at once leave the CPU to writes. A reader
/// cannot change them: `readonly = 1` refuses `SET` and `SETTINGS`.
pub fn reader_settings(q: &QueryConfig) -> Vec<String> {
    vec![
        "--readonly=1".into(),
        format!("--max_execution_time={}", q.timeout.as_secs_f64()),
        "--timeout_overflow_mode=throw".into(),
        format!("--max_memory_usage={}", q.max_memory_bytes.0),
        // Past half its memory a `GROUP BY` or `ORDER BY` goes on in files under the data
        // path instead of failing: on the 1 GiB default budget (128 MiB per query), the means
        // per 10 minutes and region over 10,000 series and 12 hours failed; with this they
        // take 2.8 s instead of 1.2-1.6 s with memory to spare (InfluxDB 1.8: 4.4 s).
        format!(
            "--max_bytes_before_external_group_by={}",
            q.max_memory_bytes.0 / 2
        ),
        format!(
            "--max_bytes_before_external_sort={}",
            q.max_memory_bytes.0 / 2
        ),
        format!(
            "--max_temporary_data_on_disk_size_for_query={}",
            q.max_memory_bytes.0.saturating_mul(SPILL_FACTOR)
        ),
        format!("--max_rows_to_read={}", q.max_rows_to_read),
        "--read_overflow_mode=throw".into(),
        format!("--max_result_bytes={}", q.max_result_bytes.0),
        "--result_overflow_mode=throw".into(),
        format!("--os_threads_nice_value_query={READER_NICE}"),
        "--max_threads=2".into(),
    ]
}

/// A query may spill this many times its memory (`query.max_memory_bytes`) to disk.
pub const SPILL_FACTOR: u64 = 8;

/// How a gathering connection fetches peers' partials (see [`Engine::with_gatherers`]).
pub fn gather_settings(connect_timeout: Duration, receive_timeout: Duration) -> Vec<String> {
    vec![
        "--readonly=2".into(),
        "--http_make_head_request=0".into(),
        "--http_skip_not_found_url_for_globs=0".into(),
        "--http_max_tries=1".into(),
        format!(
            "--http_connection_timeout={}",
            connect_timeout.as_secs_f64()
        ),
        format!("--http_receive_timeout={}", receive_timeout.as_secs_f64()),
        format!("--http_send_timeout={}", receive_timeout.as_secs_f64()),
    ]
}

/// CPU priority (Linux nice) of query threads: below the flush workers' (5), far below the
/// request path's (0).
pub const READER_NICE: i32 = 10;

/// chDB's merge threads run at a lower CPU priority than the request path (Linux nice 10; a
/// process setting, so every connection passes the same). Merges are background work that can
/// wait a moment; a request's latency cannot. Under load they otherwise competed for the same
/// two cores and set the p95 (knee 1.0-1.2 M points/s with p95 over 100 ms above it; 1.5 M
/// points/s at p95 91 ms with this). Idle CPU still goes to merges at once, and if they fall
/// far behind, chDB's parts limits slow inserts, the WAL backlog grows, and writes get 503.
const MERGE_NICE: &str = "--os_threads_nice_value_merge_mutate=10";

/// Squash the whole insert into one block, whatever its size (thresholds no flush reaches; 0
/// would disable squashing instead), and write it from one thread: chDB commits each block of
/// an insert as a part of its own, and recovery's per-entry check (`Flusher::resolve_intent`)
/// needs an entry to be in the table entirely or not at all. With chDB's defaults a flush above
/// about 1 M rows or 256 MiB became several parts (a 2.5 M-row flush made three).
const WHOLE_INSERT: &str = "min_insert_block_size_rows = 1000000000000, min_insert_block_size_bytes = 1000000000000000, max_insert_threads = 1";

/// Runs `sql` on `conn`, handing its output to `sink` chunk by chunk (whole when not
/// `streamed`); also says whether it ran to its end (a stream stopped early can leave output
/// behind on the connection).
fn run_stream(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_expected_engine_release_is_accepted() {
        assert!(version_matches("26.7.3"));
        assert!(version_matches("26.7.3.1"));
        assert!(!version_matches("26.7.30"));
        assert!(!version_matches("26.7.2"));
        assert!(!version_matches("25.8.1"));
        let msg = EngineError::WrongVersion {
            found: "25.8.1".into(),
        }
        .to_string();
        assert!(msg.contains("25.8.1") && msg.contains("26.7.3") && msg.contains("scripts/setup"));
    }
}
