//! The embedded chDB engine: one data path per process, a pool of connections on it.
//!
//! Flush workers insert Arrow batches and queries read through the same pool. Connections are
//! `Send` but not `Sync`, so each is used by one thread at a time, checked out of the pool.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chdb_rust::arrow::array::{RecordBatch, StructArray};
use chdb_rust::arrow::ffi::{to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use chdb_rust::arrow_stream::{arrow_stream_table_sql, ArrowArray, ArrowSchema};
use chdb_rust::format::OutputFormat;
use sluice_core::config::QueryConfig;
use sluice_core::names::{quote_ident, quote_str};

mod pool;
mod settings;

pub use pool::Lease;
use pool::{run_stream, Pool};
use settings::MERGE_NICE;
pub use settings::{gather_settings, reader_settings, ReadSettings, READER_NICE, SPILL_FACTOR};

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
    /// Writes to the series table so far (see [`Engine::series_written`]).
    series_writes: AtomicU64,
    /// Tells this process's count of series table writes from an earlier process's (the count
    /// starts again at 0): see [`Engine::series_version`].
    boot: u64,
    /// Free engine memory a planned read needs per thread: half of a query's memory.
    threads_free_memory: u64,
}

/// Which pool a client's query runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// This pod's data only: `/sql`, a pod's InfluxQL, the partials a pod computes for a peer.
    Local,
    /// Queries that read the partials of the tenant's pods through `url()`.
    Gather,
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
        crate::priority::keep_merges_below_requests();
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
            series_writes: AtomicU64::new(0),
            boot: boot_id(),
            threads_free_memory: reader_limits.max_memory_bytes.0 / 2,
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
        // One thread per pod, so that every pod computes its share at once: under chDB's rule
        // (a thread per GiB of free engine memory) the default budget's gathering read had one
        // thread and fetched the pods one after the other (the max per host across three pods
        // took the sum of the three shares, 211-255 ms, instead of the slowest, 80-160).
        args.push(format!(
            "--max_threads_min_free_memory_per_thread={}",
            self.threads_free_memory
        ));
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

    /// Counts a write to the series table, once it is over (done or failed): every series
    /// row the engine holds was written before the count it returns next. What is remembered
    /// of the table ([`crate::query::series_ids`]) holds only while the count stays the same.
    pub fn series_written(&self) {
        self.series_writes.fetch_add(1, Ordering::AcqRel);
    }

    /// The writes to the series table counted so far ([`Engine::series_written`]).
    pub fn series_writes(&self) -> u64 {
        self.series_writes.load(Ordering::Acquire)
    }

    /// [`Engine::series_writes`] as other pods see it: the same text only while this
    /// process's series table is unchanged.
    pub fn series_version(&self) -> String {
        format!("{:x}.{}", self.boot, self.series_writes())
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
        let mut own = pool.open_with(settings, self.threads_free_memory)?;
        let mut sent = false;
        let result = run_stream(&mut own, sql, streamed, &mut |chunk| {
            sent = true;
            sink(chunk)
        })
        .0;
        match result {
            // On two threads an aggregation needs more memory before it spills than on one:
            // a planned read that ran out of it, before it answered anything, runs again as
            // before, on one thread, where it spills sooner (taking at most twice the time).
            Err(QueryError::Engine(msg))
                if settings.planned && !sent && msg.contains("MEMORY_LIMIT_EXCEEDED") =>
            {
                tracing::debug!(error = %msg, "a planned read out of memory on two threads: again on one");
                let one = ReadSettings {
                    planned: false,
                    ..settings.clone()
                };
                let mut conn = pool.open_with(&one, self.threads_free_memory)?;
                run_stream(&mut conn, sql, streamed, sink).0
            }
            r => r,
        }
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

/// Squash the whole insert into one block, whatever its size (thresholds no flush reaches; 0
/// would disable squashing instead), and write it from one thread: chDB commits each block of
/// an insert as a part of its own, and recovery's per-entry check (`Flusher::resolve_intent`)
/// needs an entry to be in the table entirely or not at all. With chDB's defaults a flush above
/// about 1 M rows or 256 MiB became several parts (a 2.5 M-row flush made three).
pub const WHOLE_INSERT: &str = "min_insert_block_size_rows = 1000000000000, min_insert_block_size_bytes = 1000000000000000, max_insert_threads = 1";

/// A number that differs between this server's processes: random (the standard library's
/// hasher keys are), since neither the clock nor a container's process id need differ.
fn boot_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
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
