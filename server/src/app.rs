//! Wiring and lifecycle: open the engine and the WAL, recover, replay, serve, drain, stop.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use chdb_rust::format::OutputFormat;
use sluice_core::config::ServerConfig;

use crate::catalog::{Catalog, CatalogError};
use crate::engine::{Engine, EngineError};
use crate::flush::{self, FlushError, Flusher, Scheduler};
use crate::ingest::Ingest;
use crate::metrics::Metrics;
use crate::sql_guard::Guard;
use crate::wal::{CommitObserver, Wal, WalError};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot create data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot start the parse threads: {0}")]
    ParsePool(std::io::Error),
    #[error("cannot start the disk-watch thread: {0}")]
    DiskWatch(std::io::Error),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("write-ahead log: {0}")]
    Wal(#[from] WalError),
    #[error("catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error("replaying the write-ahead log: {0}")]
    Replay(#[from] FlushError),
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error(transparent)]
    Handoff(#[from] crate::handoff::HandoffError),
    #[error(transparent)]
    SeriesRule(#[from] crate::series_rule::SeriesRuleError),
    #[error("reading auth.tokens_file {path}: {source}")]
    Tokens {
        path: String,
        source: std::io::Error,
    },
}

/// Failed attempts in a row after which a table no longer holds up the start-up replay.
const REPLAY_GIVE_UP_FAILURES: u32 = 3;

/// Longest a starting pod waits for a running pod to record that it joins (see
/// [`App::join_peers`]): a pod that hangs must not keep the others from starting for long.
pub const JOIN_PATIENCE: Duration = Duration::from_secs(30);

pub struct App {
    pub cfg: ServerConfig,
    pub engine: Arc<Engine>,
    pub ingest: Ingest,
    pub scheduler: Arc<Scheduler>,
    pub flusher: Arc<Flusher>,
    pub metrics: Arc<Metrics>,
    pub guard: Guard,
    pub tokens: HashSet<String>,
    /// The tenant's other pods, for reads that gather from all of them.
    pub cluster: crate::cluster::Cluster,
    /// The tenant's catalog as last gathered (see [`crate::query::gather::VIEW_TTL`]).
    pub views: crate::query::gather::ViewCache,
    /// The columns of the shares this pod has gathered (see [`crate::query::shapes`]).
    pub shapes: crate::query::shapes::Shapes,
    /// The series that tag conditions select, as last read (see [`crate::query::series_ids`]).
    pub series_ids: crate::query::series_ids::SeriesIds,
    /// What `SHOW` statements read of this pod's series table, as last read (see
    /// [`crate::query::remember`]).
    pub series_answers: crate::query::remember::SeriesAnswers,
    /// Connections to the tenant's pods kept open between the small requests a gathering read
    /// makes from Rust (their series versions).
    pub peer_agent: ureq::Agent,
    /// Requests in flight and their memory (see [`crate::http::Admission`]).
    pub admission: crate::http::Admission,
    /// The threads that inflate and parse request bodies (see [`crate::parse_pool`]).
    pub parse: crate::parse_pool::ParsePool,
    /// Takes writes: false while replaying and while draining.
    pub ready: AtomicBool,
    pub draining: AtomicBool,
    /// When a decommission started (see `POST /decommission`); `None` when there is none.
    pub decommissioned_since: std::sync::Mutex<Option<std::time::SystemTime>>,
    /// Writes between their readiness check and their answer: a decommission's WAL is empty
    /// only when none is left to commit.
    pub writes_in_flight: std::sync::atomic::AtomicUsize,
    /// The data volume's last sample (see [`crate::disk`]).
    pub disk: Arc<crate::disk::DiskWatch>,
    /// The hand-off this pod leaves by and those it receives (see [`crate::handoff`]).
    pub handoff: crate::handoff::Handoff,
    workers: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

struct WalMetrics(Arc<Metrics>);

impl CommitObserver for WalMetrics {
    fn group_committed(&self, requests: usize, _bytes: u64, _seconds: f64) {
        self.0.wal_group_requests.observe(requests as f64);
    }
}

fn load_tokens(cfg: &ServerConfig) -> Result<HashSet<String>, StartError> {
    let mut tokens: HashSet<String> = cfg.auth.tokens.iter().cloned().collect();
    if let Some(path) = &cfg.auth.tokens_file {
        let text = std::fs::read_to_string(path).map_err(|source| StartError::Tokens {
            path: path.clone(),
            source,
        })?;
        tokens.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    Ok(tokens)
}

impl App {
    /// Opens everything and recovers interrupted flushes. The WAL backlog is not yet replayed:
    /// [`App::replay`] does that while the HTTP server already answers `/health`.
    pub fn open(cfg: ServerConfig) -> Result<Arc<Self>, StartError> {
        let data = PathBuf::from(&cfg.data_dir);
        std::fs::create_dir_all(&data).map_err(|source| StartError::DataDir {
            path: data.display().to_string(),
            source,
        })?;
        // chDB resolves some part paths against its own relative data path a second time
        // (`./data/chdb/./data/chdb/store/...`), so it only ever gets an absolute one.
        let data = data.canonicalize().map_err(|source| StartError::DataDir {
            path: data.display().to_string(),
            source,
        })?;
        crate::series_rule::check(&data, &cfg.series)?;
        let tokens = load_tokens(&cfg)?;
        let cluster = crate::cluster::Cluster::new(&cfg.cluster, &cfg.listen)?;
        let metrics = Arc::new(Metrics::new());
        metrics.series_limit.set(cfg.limits.max_series as i64);
        // Writers: one per flush worker plus one for DDL on the request path.
        let memory = crate::memory::plan(&cfg, crate::memory::cgroup_limit());
        let mut engine = Engine::open_within(
            &data.join("chdb"),
            cfg.pool.flush_workers as usize + 1,
            cfg.pool.connections as usize,
            &cfg.query,
            Some(memory.engine_memory_bytes()),
        )?;
        if cluster.configured() {
            // As many gathering reads as local ones: each holds one of these while its peers'
            // shares run on their local pools, so two pods gathering from each other at once
            // never wait on each other's connections.
            engine = engine.with_gatherers(
                cfg.pool.connections as usize,
                &cfg.query,
                cfg.cluster.connect_timeout,
                cfg.cluster.receive_timeout,
            )?;
        }
        let engine = Arc::new(engine);
        tracing::info!(version = engine.version(), "chDB engine open");
        let scheduler = Scheduler::new(
            cfg.pool.max_points_per_batch as u64,
            cfg.pool.flush_interval,
            memory.flush_retained_bytes,
        );
        let wal = {
            let s = scheduler.clone();
            Arc::new(Wal::open_with(
                &data.join("wal"),
                cfg.limits.wal_queue_depth as usize,
                cfg.limits.wal_memtable_bytes.0,
                Box::new(move |entries| s.committed(entries)),
                Arc::new(WalMetrics(metrics.clone())),
            )?)
        };
        let catalog = Arc::new(Catalog::load(engine.clone(), &cfg, &wal)?);
        let table_functions = engine
            .query(
                "SELECT name FROM system.table_functions",
                OutputFormat::TabSeparated,
            )
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .lines()
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let flusher = Arc::new(Flusher {
            wal: wal.clone(),
            engine: engine.clone(),
            metrics: metrics.clone(),
            max_rows: cfg.pool.max_points_per_batch as u64,
        });
        let recovered = flush::recover_intents(&flusher)?;
        if recovered > 0 {
            tracing::info!(
                recovered,
                "re-inserted interrupted flushes (deduplicated by token)"
            );
        }
        scheduler.committed(&wal.pending()?);
        let disk = Arc::new(crate::disk::DiskWatch::new());
        let disk_watch = crate::disk::start(crate::disk::Watched {
            watch: disk.clone(),
            wal: wal.clone(),
            scheduler: scheduler.clone(),
            metrics: metrics.clone(),
            data_dir: data.clone(),
            // Two memtables, written out before their entries were flushed and deleted.
            reclaim_slack: 2 * cfg.limits.wal_memtable_bytes.0,
            limits: cfg.limits.clone(),
        })
        .map_err(StartError::DiskWatch)?;
        // A decommission outlives a restart: the pod comes back refusing writes and resumes it.
        let handoff = crate::handoff::Handoff::open(data.clone())?;
        let since = handoff
            .leaving()
            .map(|l| std::time::UNIX_EPOCH + Duration::from_secs(l.since_unix_seconds));
        let ingest = Ingest {
            catalog,
            wal,
            metrics: metrics.clone(),
            limits: cfg.limits.clone(),
            cluster_tag: cfg.series.cluster_tag.as_deref().map(std::sync::Arc::from),
        };
        let series_answers =
            crate::query::remember::SeriesAnswers::new(metrics.series_answers.clone());
        Ok(Arc::new(Self {
            engine,
            ingest,
            scheduler,
            flusher,
            metrics,
            guard: Guard::new(table_functions),
            tokens,
            cluster,
            views: Default::default(),
            shapes: Default::default(),
            series_ids: Default::default(),
            series_answers,
            peer_agent: ureq::AgentBuilder::new().build(),
            admission: crate::http::Admission::new(
                cfg.limits.max_requests_in_flight,
                cfg.limits.request_memory_bytes.0,
            ),
            parse: crate::parse_pool::ParsePool::start(
                crate::parse_pool::ParsePool::default_threads(),
            )
            .map_err(StartError::ParsePool)?,
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            decommissioned_since: std::sync::Mutex::new(since),
            writes_in_flight: std::sync::atomic::AtomicUsize::new(0),
            disk,
            handoff,
            workers: std::sync::Mutex::new(vec![disk_watch]),
            cfg,
        }))
    }

    /// Starts the flush workers, flushes everything the WAL holds, loads the series set, and
    /// marks the server ready. Blocking.
    pub fn replay(&self) -> Result<(), StartError> {
        let workers = flush::start_workers(
            self.cfg.pool.flush_workers as usize,
            self.scheduler.clone(),
            self.flusher.clone(),
        );
        self.workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(workers);
        let backlog = self.scheduler.backlog();
        if backlog.rows > 0 {
            tracing::info!(
                points = backlog.rows,
                bytes = backlog.bytes,
                "replaying write-ahead log"
            );
        }
        self.scheduler.drain();
        while !self.scheduler.wait_empty(Duration::from_secs(10)) {
            let b = self.scheduler.backlog();
            // A table whose flush keeps failing keeps its entries in the WAL; it must not keep
            // the whole pod from serving (see `/ready`'s `failing_tables`).
            if self.scheduler.only_failing_left(REPLAY_GIVE_UP_FAILURES) {
                for f in self.scheduler.failing_tables() {
                    tracing::error!(
                        table = f.table,
                        failures = f.failures,
                        error = f.error,
                        "flush keeps failing; serving without it"
                    );
                }
                break;
            }
            tracing::info!(points = b.rows, "still replaying write-ahead log");
        }
        let series = self.ingest.catalog.load_series()?;
        self.metrics.series.set(series as i64);
        if self.decommissioning() {
            tracing::info!(series, "decommissioning: resuming it, writes refused");
            return Ok(());
        }
        self.join_peers();
        self.scheduler.stop_draining();
        self.ready.store(true, Ordering::Release);
        self.metrics.ready.set(1);
        tracing::info!(series, "ready");
        Ok(())
    }

    /// Tells the tenant's running pods that this pod is one of them before it reports ready:
    /// the Service sends it writes only then, so no pod reads without its data (their peer
    /// files list it only once the kubelet refreshes them). Blocks up to [`JOIN_PATIENCE`]
    /// for a running pod that does not record it.
    pub fn join_peers(&self) {
        if !self.cluster.configured() {
            return;
        }
        let told = crate::cluster::announce::announce(
            &self.cluster,
            crate::cluster::announce::Announce::Join,
            JOIN_PATIENCE,
        );
        match told {
            None => tracing::warn!(
                "this pod cannot find itself among its peers (by host name or listening \
                 address): running pods learn of it from their peer files only"
            ),
            Some(t) if t.unanswered.is_empty() && t.recorded.is_empty() => {}
            Some(t) if t.unanswered.is_empty() => tracing::info!(
                recorded = ?t.recorded,
                not_running = ?t.not_running,
                "joined the tenant's pods"
            ),
            Some(t) => tracing::warn!(
                recorded = ?t.recorded,
                unanswered = ?t.unanswered,
                "some pods did not record that this pod joined: their reads miss it until \
                 their peer files list it"
            ),
        }
    }

    /// Stops taking writes, flushes the WAL to chDB (up to `timeout`), stops the workers and
    /// the committer. Returns whether everything was flushed.
    pub fn shutdown(&self, timeout: Duration) -> bool {
        self.ready.store(false, Ordering::Release);
        self.draining.store(true, Ordering::Release);
        self.metrics.ready.set(0);
        self.ingest.wal.close();
        self.scheduler.drain();
        let flushed = self.scheduler.wait_empty(timeout);
        self.scheduler.stop();
        self.disk.stop();
        let workers: Vec<_> = self
            .workers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for w in workers {
            let _ = w.join();
        }
        flushed
    }

    /// Whether a decommission is under way: the pod refuses writes and flushes its WAL.
    pub fn decommissioning(&self) -> bool {
        self.decommissioned_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Gauges computed at scrape time.
    pub fn refresh_gauges(&self) {
        let b = self.scheduler.backlog();
        let m = &self.metrics;
        m.wal_backlog_bytes.set(b.bytes as i64);
        m.wal_backlog_points.set(b.rows as i64);
        m.wal_oldest_age.set(b.oldest_age.as_secs_f64());
        m.flush_lag.set(b.oldest_age.as_secs_f64());
        m.wal_queue.set(self.ingest.wal.queued() as i64);
        m.series.set(self.ingest.catalog.series_count() as i64);
        m.flush_failing_tables
            .set(self.scheduler.failing_tables().len() as i64);
        m.request_memory_available
            .set(self.admission.memory_available() as i64);
        m.requests_in_flight
            .set(self.admission.requests_in_flight() as i64);
        if let Ok(parts) = self.ingest.catalog.part_counts() {
            m.table_parts.reset();
            // Tables beyond the label cap are summed into one series.
            let mut summed: std::collections::HashMap<String, i64> = Default::default();
            for (t, n) in parts {
                *summed.entry(m.table_label(&t)).or_default() += n;
            }
            for (t, n) in summed {
                m.table_parts.with_label_values(&[&t]).set(n);
            }
        }
    }
}
