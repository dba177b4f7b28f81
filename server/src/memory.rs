//! One memory budget for the process, shared out among what holds memory, and following the
//! cgroup's limit: a pod given less memory runs with smaller buffers (slower) instead of being
//! killed by the kernel.
//!
//! What the budget covers, each with its share of the limit `L` the process may use (its
//! cgroup's limit, else the machine's memory, or `limits.memory_bytes` when set and smaller). A configured size is kept when it is below its
//! share; above, it is lowered to the share and the start-up log says so.
//!
//! | what | setting | share of `L` |
//! |---|---|---|
//! | WAL memtables (up to four) | `limits.wal_memtable_bytes` | 4 x memtable <= 25 % |
//! | batches kept from commit to flush | (built in, 256 MiB) | 10 % |
//! | request bodies, inflated and parsed | `limits.request_memory_bytes` | 20 % |
//! | queries (each of `pool.connections`) | `query.max_memory_bytes` | 15 % in all |
//! | allocator memory touched at start-up | `limits.pretouch_bytes` | 25 % (reused by the above) |
//!
//! The shares are of `L` less [`ENGINE_RESERVE`] (the engine's code, resident once it has run,
//! and its fixed working memory), and the rest (at least 30 % of that) is left to the engine
//! too: its inserts and merges, its caches. Pre-touched memory is not spent on top of the
//! others: it is the allocator's, and request and flush buffers are later carved out of it.
//!
//! The rows of one insert (`pool.max_points_per_batch`) are lowered to fit 10 % at
//! [`INSERT_BYTES_PER_POINT`]: an insert's blocks are the engine's largest allocation.

use sluice_core::config::{ByteSize, ServerConfig, MIN_WAL_MEMTABLE_BYTES};

use crate::flush::RETAINED_BYTES;

/// What the engine holds whatever the budget: libchdb's code pages (about 185 MiB resident
/// under load, charged to the cgroup like any other memory) and its own baseline.
pub const ENGINE_RESERVE: u64 = 320 << 20;

/// libchdb's code pages resident under load (file-backed, so not in the engine's own memory
/// tracker, yet charged to the cgroup).
pub const ENGINE_CODE: u64 = 192 << 20;

/// The engine's memory per point while it inserts a batch (Arrow columns, its blocks, the
/// compressed part), five fields: the basis for lowering `pool.max_points_per_batch`.
pub const INSERT_BYTES_PER_POINT: u64 = 128;

/// Fewest rows per insert the plan lowers to: below it parts get too many for merges.
const MIN_POINTS_PER_BATCH: u64 = 50_000;

/// The sizes in force, after the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// What the process may use, if known.
    pub limit: Option<u64>,
    pub wal_memtable_bytes: u64,
    pub flush_retained_bytes: u64,
    pub request_memory_bytes: u64,
    pub query_memory_bytes: u64,
    pub pretouch_bytes: u64,
    pub max_points_per_batch: u64,
    /// Settings lowered to fit, as (key, configured, in force).
    pub lowered: Vec<(&'static str, u64, u64)>,
}

impl MemoryPlan {
    /// What the engine's own allocations may take (its memory tracker's limit): the limit less
    /// the engine's code pages ([`ENGINE_CODE`]) and what the server holds outside the engine
    /// (memtables; retained batches and request memory, or the pre-touched memory they are
    /// carved from when that is larger), and never less than a quarter of the limit. Query
    /// memory is the engine's and stays inside. None without a limit.
    pub fn engine_memory_bytes(&self) -> Option<u64> {
        let limit = self.limit?;
        let outside = ENGINE_CODE
            + 4 * self.wal_memtable_bytes
            + (self.flush_retained_bytes + self.request_memory_bytes).max(self.pretouch_bytes);
        Some(limit.saturating_sub(outside).max(limit / 4))
    }

    /// Sum of what the budget bounds, pre-touched memory aside (it is reused, not added).
    pub fn bounded_bytes(&self, connections: u32) -> u64 {
        4 * self.wal_memtable_bytes
            + self.flush_retained_bytes
            + self.request_memory_bytes
            + u64::from(connections.max(1)) * self.query_memory_bytes
    }
}

/// The plan for `cfg` under `limit` (none: the configured sizes as they are), or under
/// `limits.memory_bytes` when that is set and smaller.
pub fn plan(cfg: &ServerConfig, limit: Option<u64>) -> MemoryPlan {
    let limit = match (cfg.limits.memory_bytes.0, limit) {
        (0, l) => l,
        (m, Some(l)) => Some(m.min(l)),
        (m, None) => Some(m),
    };
    let mut lowered = Vec::new();
    let mut fit = |key: &'static str, configured: u64, share: Option<u64>, floor: u64| {
        let Some(share) = share else {
            return configured;
        };
        let v = configured.min(share.max(floor));
        if v < configured {
            lowered.push((key, configured, v));
        }
        v
    };
    // Shared out: what is left beside the engine's reserve (never less than a quarter).
    let shared = limit.map(|l| l.saturating_sub(ENGINE_RESERVE).max(l / 4));
    let part = |num: u64, den: u64| shared.map(|l| l / den * num);
    let connections = u64::from(cfg.pool.connections.max(1));
    let wal_memtable_bytes = fit(
        "limits.wal_memtable_bytes",
        cfg.limits.wal_memtable_bytes.0,
        part(1, 16),
        MIN_WAL_MEMTABLE_BYTES.0,
    );
    let flush_retained_bytes = fit("flush retained batches", RETAINED_BYTES, part(1, 10), 0);
    let request_memory_bytes = fit(
        "limits.request_memory_bytes",
        cfg.limits.request_memory_bytes.0,
        part(1, 5),
        1 << 20,
    );
    let query_memory_bytes = fit(
        "query.max_memory_bytes",
        cfg.query.max_memory_bytes.0,
        part(3, 20).map(|q| q / connections),
        1 << 20,
    );
    let pretouch_bytes = fit(
        "limits.pretouch_bytes",
        cfg.limits.pretouch_bytes.0,
        part(1, 4),
        0,
    );
    let max_points_per_batch = fit(
        "pool.max_points_per_batch",
        u64::from(cfg.pool.max_points_per_batch),
        part(1, 10).map(|b| b / INSERT_BYTES_PER_POINT),
        MIN_POINTS_PER_BATCH,
    );
    MemoryPlan {
        limit,
        max_points_per_batch,
        wal_memtable_bytes,
        flush_retained_bytes,
        request_memory_bytes,
        query_memory_bytes,
        pretouch_bytes,
        lowered,
    }
}

/// Puts the plan's sizes into `cfg`, so that everything started from it uses them.
pub fn apply(plan: &MemoryPlan, cfg: &mut ServerConfig) {
    cfg.limits.wal_memtable_bytes = ByteSize(plan.wal_memtable_bytes);
    cfg.limits.request_memory_bytes = ByteSize(plan.request_memory_bytes);
    cfg.query.max_memory_bytes = ByteSize(plan.query_memory_bytes);
    cfg.limits.pretouch_bytes = ByteSize(plan.pretouch_bytes);
    cfg.pool.max_points_per_batch =
        u32::try_from(plan.max_points_per_batch).unwrap_or(cfg.pool.max_points_per_batch);
}

/// The memory this process may use: the smallest limit of its cgroup and the cgroup's ancestors
/// (v2 `memory.max`, else v1 `memory.limit_in_bytes`), else the machine's memory (`MemTotal`).
/// The cgroup is found through `/proc/self/cgroup`, so the limit is found with or without a
/// cgroup namespace (a pod sees its own cgroup as the root; a process started under a
/// benchmark's cgroup does not).
pub fn memory_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    limit_files(&own)
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        // cgroup v1 reports "no limit" as a number near 2^63 (v2 as "max", which does not parse).
        .filter(|&v| v < 1 << 60)
        .min()
        .or_else(|| mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?))
}

/// The files that may hold a memory limit for a process whose `/proc/self/cgroup` reads
/// `proc_self_cgroup`: its cgroup's and every ancestor's, v2 and v1.
pub fn limit_files(proc_self_cgroup: &str) -> Vec<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add_chain = |root: &str, path: &str, file: &str| {
        let mut dir = Some(Path::new(path.trim_start_matches('/')));
        while let Some(d) = dir {
            let f = Path::new(root).join(d).join(file);
            if !out.contains(&f) {
                out.push(f);
            }
            dir = d.parent();
        }
    };
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            add_chain("/sys/fs/cgroup", path, "memory.max");
        } else if controllers.split(',').any(|c| c == "memory") {
            add_chain("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
        }
    }
    add_chain("/sys/fs/cgroup", "/", "memory.max");
    add_chain("/sys/fs/cgroup/memory", "/", "memory.limit_in_bytes");
    out
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn limit_files_cover_the_own_cgroup_and_its_ancestors() {
        let v1 = "9:name=systemd:/\n4:memory:/bench/run1\n0::/";
        let files: Vec<String> = limit_files(v1)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            files,
            [
                "/sys/fs/cgroup/memory/bench/run1/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory/bench/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory.max",
            ]
        );
        let v2 = "0::/kubepods/pod1/c1";
        let files = limit_files(v2);
        assert_eq!(
            files[0].display().to_string(),
            "/sys/fs/cgroup/kubepods/pod1/c1/memory.max"
        );
        assert!(files.len() == 5, "{files:?}");
        assert_eq!(limit_files("garbage").len(), 2);
    }

    #[test]
    fn a_large_machine_keeps_the_configured_sizes() {
        let cfg = ServerConfig::default();
        let p = plan(&cfg, Some(24 * GIB));
        assert!(p.lowered.is_empty(), "{:?}", p.lowered);
        assert_eq!(p.wal_memtable_bytes, cfg.limits.wal_memtable_bytes.0);
        assert_eq!(p.pretouch_bytes, cfg.limits.pretouch_bytes.0);
        assert_eq!(plan(&cfg, None), MemoryPlan { limit: None, ..p });
    }

    #[test]
    fn a_small_pod_gets_everything_within_its_limit() {
        let cfg = ServerConfig::default();
        for limit in [512 * MIB, GIB, 2 * GIB] {
            let p = plan(&cfg, Some(limit));
            assert!(
                p.bounded_bytes(cfg.pool.connections) <= limit * 70 / 100,
                "{limit}: {p:?}"
            );
            assert!(p.pretouch_bytes <= limit / 4);
            assert!(!p.lowered.is_empty());
        }
        let p = plan(&cfg, Some(GIB));
        // A sixteenth of what the engine's reserve leaves.
        assert_eq!(p.wal_memtable_bytes, 44 * MIB);
        assert_eq!(p.max_points_per_batch, 576_716);
        // Under 512 MiB the reserve leaves 192 MiB; inserts go down to the floor's side.
        let small = plan(&cfg, Some(512 * MIB));
        assert_eq!(small.max_points_per_batch, 157_286);
        assert!(4 * small.wal_memtable_bytes + small.request_memory_bytes <= 96 * MIB);
        let mut configured = cfg.clone();
        configured.limits.memory_bytes = ByteSize(GIB);
        assert_eq!(
            plan(&configured, Some(24 * GIB)),
            p,
            "the configured budget is used"
        );
        assert_eq!(plan(&configured, None), p);
        assert_eq!(p.request_memory_bytes, (GIB - ENGINE_RESERVE) / 5);
        let mut applied = cfg.clone();
        apply(&p, &mut applied);
        assert_eq!(applied.limits.wal_memtable_bytes.0, 44 * MIB);
        assert_eq!(applied.pool.max_points_per_batch, 576_716);
        // The engine's tracker gets what the server does not hold itself.
        let engine = p.engine_memory_bytes().unwrap();
        assert!(engine > 400 * MIB && engine < GIB / 2, "{engine}");
        assert_eq!(plan(&cfg, None).engine_memory_bytes(), None);
        assert_eq!(applied.query.max_memory_bytes.0, p.query_memory_bytes);
    }

    #[test]
    fn mem_total_reads_meminfo() {
        assert_eq!(
            mem_total("MemTotal:       24508076 kB\nMemFree: 1 kB\n"),
            Some(24508076 * 1024)
        );
        assert_eq!(mem_total("nothing"), None);
    }
}
