//! `sluice-server`: the binary. Configuration is read from the TOML file, then `SLUICE_*`
//! environment variables, then the command line, each overriding the one before.

use std::process::ExitCode;
use std::time::Duration;

use axum::serve::ListenerExt;
use clap::Parser;
use sluice_core::config::{apply_env, ServerConfig};
use sluice_server::app::App;
use sluice_server::engine::{CHDB_MALLOC_CONF, SMALL_MEMORY_LIMIT};
use sluice_server::memory;

/// mimalloc instead of glibc malloc: the write path allocates and frees multi-megabyte column
/// buffers per request, which glibc hands back to the kernel and faults in again each time
/// (page faults and zeroing were several percent of server CPU), and its small-object paths
/// are faster too.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v2's and v3's `mimalloc.h` (libmimalloc-sys does not name
/// it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its documented defaults in mimalloc v2 (10 ms) and v3 (1000 ms, the version libmimalloc-sys
/// builds by default), checked before changing it, so another option layout is left alone.
const MI_PURGE_DELAY_DEFAULTS: [std::ffi::c_long; 2] = [10, 1000];

/// Keeps freed memory mapped: with mimalloc's default (give it back after a delay) every
/// request's buffers were faulted in and zeroed afresh, about a tenth of the request path's CPU.
/// RSS then stays at its high-water mark (the buffers of the largest requests in flight), which
/// is also what a memory limit has to allow for. `MIMALLOC_PURGE_DELAY` still overrides this.
/// (Until the v3 default was recognised this silently did nothing: 2.2 GiB were purged and
/// faulted in again during a 15 s run at 1 M points/s; the test below keeps it honest.)
///
/// Under a budget below [`SMALL_MEMORY_LIMIT`] freed memory is given back after
/// [`SMALL_LIMIT_PURGE_DELAY_MS`] instead: each thread's heap keeps its own freed pages, so
/// kept memory is more than the peak of what is live at once. Before request bodies were parsed
/// on a fixed set of threads (`sluice_server::parse_pool`), a server under a 1 GiB limit,
/// offered more than its knee, held 0.8-1.0 GiB of anonymous memory and was killed within
/// 21 s; giving memory back, it stayed at 0.54-0.65 GiB. With the parse threads a 1 GiB budget
/// keeps its memory without that (bench/README.md, "Memory").
fn keep_freed_memory(budget: u64) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    let delay = purge_delay(budget);
    // SAFETY: plain option getters/setters of the allocator, callable at any time.
    unsafe {
        if MI_PURGE_DELAY_DEFAULTS.contains(&libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY))
        {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, delay);
        }
    }
}

/// mimalloc's purge delay under a small memory limit (see [`keep_freed_memory`]).
const SMALL_LIMIT_PURGE_DELAY_MS: std::ffi::c_long = 10;

/// The purge delay for a process with a budget of `budget` bytes: never (-1), or soon when
/// small.
fn purge_delay(budget: u64) -> std::ffi::c_long {
    if budget < SMALL_MEMORY_LIMIT {
        SMALL_LIMIT_PURGE_DELAY_MS
    } else {
        -1
    }
}

/// Runs this binary again with chDB's allocator configured ([`CHDB_MALLOC_CONF`]) unless the
/// variable is already set (by the operator, or by this very re-execution). `exec` keeps the
/// process id, so supervisors see one process. If it fails, the server goes on with chDB's
/// defaults, only slower.
fn configure_chdb_allocator(budget: u64) -> Option<std::io::Error> {
    use std::os::unix::process::CommandExt;
    let var = CHDB_MALLOC_CONF.0;
    let value = sluice_server::engine::chdb_malloc_conf(budget);
    if std::env::var_os(var).is_some() {
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Some(e),
    };
    Some(
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(var, value)
            .exec(),
    )
}

#[derive(Parser, Debug)]
#[command(
    name = "sluice-server",
    version,
    about = "Durable InfluxDB-compatible ingest into embedded chDB"
)]
struct Args {
    /// Address to listen on [default: 127.0.0.1:8086]
    #[arg(long)]
    listen: Option<String>,
    /// Directory for the write-ahead log and chDB data [default: ./data]
    #[arg(long)]
    data_dir: Option<String>,
    /// TOML configuration file (see README "Configuration")
    #[arg(long)]
    config: Option<String>,
    /// Longest time shutdown may spend flushing the WAL into chDB before exiting
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    shutdown_timeout: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    sluice_core::config::parse_duration(s).map_err(|e| e.to_string())
}

/// The configuration, and the unknown `SLUICE_*` variables to warn about once logging runs.
fn load_config(args: &Args) -> Result<(ServerConfig, Vec<String>), String> {
    let mut cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {path}: {e}"))?;
            toml::from_str::<ServerConfig>(&text).map_err(|e| format!("config file {path}: {e}"))?
        }
        None => ServerConfig::default(),
    };
    let unknown = apply_env(&mut cfg, std::env::vars()).map_err(|e| e.to_string())?;
    if let Some(l) = &args.listen {
        cfg.listen = l.clone();
    }
    if let Some(d) = &args.data_dir {
        cfg.data_dir = d.clone();
    }
    cfg.validate()
        .map_err(|e| format!("invalid configuration: {e}"))?;
    Ok((cfg, unknown))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("SLUICE_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: draining"),
    }
}

async fn run(cfg: ServerConfig, shutdown_timeout: Duration) -> Result<(), String> {
    let listen = cfg.listen.clone();
    let app = tokio::task::spawn_blocking(move || App::open(cfg))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    // Without TCP_NODELAY a streamed answer's last small frames wait for the client's delayed
    // ACK (40 ms on Linux): a pod's share of a gathered read cost 40-60 ms however small.
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?
        .tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
            }
        });
    tracing::info!(listen = %listen, data_dir = %app.cfg.data_dir, "listening");
    let replay = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || app.replay())
    };
    let router = sluice_server::http::router(app.clone());
    // The peer's address: a pod that receives a hand-off reads from the pod that asked.
    let serve = axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal());
    let resumed = app.clone();
    tokio::spawn(async move {
        match replay.await {
            Ok(Ok(())) => {
                if resumed.handoff.leaving().is_some() {
                    sluice_server::handoff::send::start(&resumed);
                }
            }
            Ok(Err(e)) => {
                // Not ready and never will be: exit so the supervisor restarts and reports it.
                tracing::error!(error = %e, "replay failed");
                std::process::exit(1);
            }
            Err(e) => tracing::error!(error = %e, "replay task failed"),
        }
    });
    serve.await.map_err(|e| format!("http server: {e}"))?;
    let flushed = tokio::task::spawn_blocking(move || app.shutdown(shutdown_timeout))
        .await
        .unwrap_or(false);
    if flushed {
        tracing::info!("write-ahead log flushed; exiting");
    } else {
        tracing::warn!("shutdown timeout reached with points still in the write-ahead log; they are replayed at the next start");
    }
    Ok(())
}

/// Touches `bytes` of the allocator's memory once and frees it again, so that the request path
/// later reuses pages that are already mapped instead of faulting fresh ones in.
///
/// Why: when load jumps, more requests are in flight at once and their buffers need memory the
/// process has never touched. Each first touch is a page fault that zeroes a page (a 2 MiB
/// page where transparent huge pages apply), in the request task, at the worst moment. On the
/// 2-core benchmark machine about 0.5-1 GiB was faulted in that way within a second or two
/// of a jump from 1 M to 3.6 M points/s; the request path then spent up to a core in the
/// kernel, fell behind, and about half such runs stalled (p95 0.2-1.2 s). With 512 MiB
/// touched at start-up, 18 of 18 runs held p95 at 22-26 ms (see Performance in the README).
/// Like a JVM's `AlwaysPreTouch`, this costs resident memory from the start, not more memory
/// at peak; it only works because freed memory stays mapped ([`keep_freed_memory`]).
fn pretouch(bytes: u64) -> Duration {
    const BLOCK: usize = 8 << 20;
    const PAGE: usize = 4096;
    let started = std::time::Instant::now();
    let blocks = usize::try_from(bytes).unwrap_or(usize::MAX).div_ceil(BLOCK);
    let mut held: Vec<Vec<u8>> = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let mut block: Vec<u8> = Vec::with_capacity(BLOCK);
        for page in block.spare_capacity_mut().iter_mut().step_by(PAGE) {
            page.write(0);
        }
        held.push(block);
    }
    // All are held until here, so each block got memory of its own.
    drop(held);
    started.elapsed()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (mut cfg, unknown) = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice-server: {e}");
            return ExitCode::from(2);
        }
    };
    // Both allocators follow the budget; chDB's reads its settings when the library loads, so
    // this may run the binary again.
    let cgroup = memory::cgroup_limit();
    let budget = memory::budget(&cfg, cgroup);
    let reexec_failed = configure_chdb_allocator(budget);
    keep_freed_memory(budget);
    init_logging();
    if let Some(e) = reexec_failed {
        tracing::warn!(error = %e, "could not re-execute with chDB's allocator configured; running with its defaults");
    }
    for var in unknown {
        tracing::warn!(var, "ignoring unknown SLUICE_* environment variable");
    }
    let plan = memory::plan(&cfg, cgroup);
    memory::apply(&plan, &mut cfg);
    for (key, configured, in_force) in &plan.lowered {
        tracing::info!(
            key,
            configured,
            in_force,
            memory_budget = plan.limit,
            "lowered to fit the memory budget"
        );
    }
    tracing::info!(
        memory_budget = plan.limit,
        cgroup_limit = cgroup,
        wal_memtables = 4 * plan.wal_memtable_bytes,
        flush_retained = plan.flush_retained_bytes,
        requests = plan.request_memory_bytes,
        query_each = plan.query_memory_bytes,
        pretouch = plan.pretouch_bytes,
        max_points_per_batch = plan.max_points_per_batch,
        engine = plan.engine_memory_bytes(),
        bounded = plan.bounded_bytes(cfg.pool.connections),
        "memory budget"
    );
    let bytes = plan.pretouch_bytes;
    if bytes > 0 {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            tracing::warn!(
                "MIMALLOC_PURGE_DELAY is set: memory touched at start-up may be given back"
            );
        }
        let took = pretouch(bytes);
        tracing::info!(
            bytes,
            took_ms = took.as_millis() as u64,
            "touched the allocator's memory"
        );
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice-server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cfg, args.shutdown_timeout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-server: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_stays_mapped() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        keep_freed_memory(memory::DEFAULT_BUDGET);
        // SAFETY: a plain option getter.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, -1, "mimalloc still purges freed memory");
    }

    #[test]
    fn small_limits_give_freed_memory_back() {
        assert_eq!(purge_delay(memory::DEFAULT_BUDGET), -1);
        assert_eq!(purge_delay(SMALL_MEMORY_LIMIT), -1);
        assert_eq!(purge_delay(512 << 20), SMALL_LIMIT_PURGE_DELAY_MS);
    }

    /// Resident bytes of this process.
    fn resident() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// Memory touched once is reused: allocating and filling as much again afterwards adds
    /// (almost) nothing to the resident set, where it would otherwise add all of it.
    #[test]
    fn pretouched_memory_is_reused_without_growing() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        keep_freed_memory(memory::DEFAULT_BUDGET);
        const SIZE: usize = 256 << 20;
        let before = resident();
        pretouch(SIZE as u64);
        let touched = resident();
        assert!(
            touched - before >= SIZE as u64 / 2,
            "pretouch made {} MiB resident",
            (touched - before) >> 20
        );
        // What a burst of requests does: many buffers of a few MiB, all alive at once.
        let buffers: Vec<Vec<u8>> = (0..SIZE / (4 << 20)).map(|_| vec![1u8; 4 << 20]).collect();
        let after = resident();
        assert_eq!(buffers.len(), 64);
        assert!(
            after.saturating_sub(touched) < SIZE as u64 / 4,
            "the buffers added {} MiB although {} MiB were touched before",
            after.saturating_sub(touched) >> 20,
            SIZE >> 20
        );
    }
}
