//! One memory budget for the process, shared out among what holds memory, and following the
//! cgroup's limit: a pod given less memory runs with smaller buffers (slower) instead of being
//! killed by the kernel.
//!
//! The budget `L` is `limits.memory_bytes` when set (a smaller cgroup limit still wins), else
//! the cgroup's limit, else [`DEFAULT_BUDGET`] (1 GiB): a server started outside a container
//! plans for 1 GiB whatever the machine has, and a larger budget is a setting. What the budget
//! covers, each with its share of `L`. A configured size is kept when it is below its share;
//! above, it is lowered to the share and the start-up log says so.
//!
//! | what | setting | share of `L` |
//! |---|---|---|
//! | WAL memtables (up to four) | `limits.wal_memtable_bytes` | 4 x memtable <= 25 % |
//! | batches kept from commit to flush (until their insert's columns are built) | (built in, 256 MiB) | 10 % |
//! | request bodies, inflated and parsed | `limits.request_memory_bytes` | 20 % |
//! | each query (of `pool.connections`) | `query.max_memory_bytes` | 1/8 of `L`, within the engine's limit |
//! | allocator memory touched at start-up | `limits.pretouch_bytes` | 25 % (reused by the above) |
//!
//! The shares are of `L` less [`unshared`] (the engine's code, and a third of `L` for the
//! engine's merges and caches and the allocators' overhead), and the rest (at least 30 % of
//! that) is left to the engine too: its inserts, and its queries (each limited to an eighth
//! of `L`, all of the engine's allocations together to [`MemoryPlan::engine_memory_bytes`]).
//! Pre-touched memory is not spent on top of the others: it is the allocator's, and request
//! and flush buffers are later carved out of it.
//!
//! The rows of one insert (`pool.max_points_per_batch`) are lowered to fit 10 % at
//! [`INSERT_BYTES_PER_POINT`]: an insert's blocks are the engine's largest allocation.

use sluice_core::config::{ByteSize, ServerConfig, MIN_WAL_MEMTABLE_BYTES};

use crate::flush::RETAINED_BYTES;

/// Each query may use `1 / QUERY_SHARE` of the budget (128 MiB of 1 GiB). Queries are not
/// given an even split of a fixed share: a tenth of a small budget, split between two
/// connections, failed a `GROUP BY` over a million rows. Together they stay within the
/// engine's own limit ([`MemoryPlan::engine_memory_bytes`]), which fails a statement (a query,
/// or an insert that is retried) rather than let the process grow past the budget.
pub const QUERY_SHARE: u64 = 8;

/// What no share bounds: libchdb's code pages ([`ENGINE_CODE`]) and a third of the budget (at
/// least [`UNSHARED_FLOOR`]) for the engine's merges and caches and for the allocators' own
/// overhead. The last is not small: each thread's allocator heap keeps pages that another
/// thread freed into it, so the server's resident memory is about twice what it holds live at
/// once. Measured on the standard ramp, a plan that left 320 MiB outside the shares peaked at
/// 1.13-1.18 GiB under a 1 GiB budget; one that leaves a third of it peaks under it
/// (bench/README.md, "Memory").
pub fn unshared(limit: u64) -> u64 {
    ENGINE_CODE + (limit / 3).max(UNSHARED_FLOOR)
}

/// The least [`unshared`] keeps beside the code pages, however small the budget.
pub const UNSHARED_FLOOR: u64 = 128 << 20;

/// libchdb's code pages resident under load (file-backed, so not in the engine's own memory
/// tracker, yet charged to the cgroup).
pub const ENGINE_CODE: u64 = 192 << 20;

/// The memory per point an insert is planned at, five fields: the basis for lowering
/// `pool.max_points_per_batch`. A planning ratio, not the insert's peak: `examples/insert_probe`
/// measured 64 bytes a point of Arrow columns in the server and 95-167 in the engine (its
/// columns grow by doubling). The budget's fit is shown by the measured peak RSS, and a truer
/// figure would only make inserts smaller, which costs the write path (bench/README.md, "Memory").
pub const INSERT_BYTES_PER_POINT: u64 = 128;

/// Fewest rows per insert the plan lowers to: below it parts get too many for merges.
const MIN_POINTS_PER_BATCH: u64 = 50_000;

/// The budget of a server with no memory limit of its own (no cgroup limit, no
/// `limits.memory_bytes`): measured on the standard ramp, a server under it reaches the same
/// knee as one planning for the whole machine (bench/README.md, "Memory").
pub const DEFAULT_BUDGET: u64 = 1 << 30;

/// The sizes in force, after the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// The budget: what the process plans to use.
    pub limit: u64,
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
    /// the engine's code pages ([`ENGINE_CODE`]) and what the server holds outside the engine:
    /// memtables, and its own heap, which is resident at about twice the retained batches and
    /// request memory it holds live (each thread's heap keeps pages of its own), or the
    /// pre-touched memory when that is larger; never less than a quarter of the limit. Query
    /// memory is the engine's and stays inside.
    pub fn engine_memory_bytes(&self) -> u64 {
        let limit = self.limit;
        let heap =
            (2 * (self.flush_retained_bytes + self.request_memory_bytes)).max(self.pretouch_bytes);
        let outside = ENGINE_CODE + 4 * self.wal_memtable_bytes + heap;
        limit.saturating_sub(outside).max(limit / 4)
    }

    /// Sum of what the budget bounds, pre-touched memory aside (it is reused, not added):
    /// queries count at most the engine's own limit, which holds them all together.
    pub fn bounded_bytes(&self, connections: u32) -> u64 {
        let queries = (u64::from(connections.max(1)) * self.query_memory_bytes)
            .min(self.engine_memory_bytes());
        4 * self.wal_memtable_bytes
            + self.flush_retained_bytes
            + self.request_memory_bytes
            + queries
    }
}

/// The budget of a process whose cgroup allows `cgroup` bytes (`None`: no limit):
/// `limits.memory_bytes` when set, within the cgroup's limit; else the cgroup's limit; else
/// [`DEFAULT_BUDGET`].
pub fn budget(cfg: &ServerConfig, cgroup: Option<u64>) -> u64 {
    match (cfg.limits.memory_bytes.0, cgroup) {
        (0, Some(l)) => l,
        (0, None) => DEFAULT_BUDGET,
        (m, Some(l)) => m.min(l),
        (m, None) => m,
    }
}

/// The plan for `cfg` in a cgroup that allows `cgroup` bytes (see [`budget`]).
pub fn plan(cfg: &ServerConfig, cgroup: Option<u64>) -> MemoryPlan {
    let limit = budget(cfg, cgroup);
    let mut lowered = Vec::new();
    let mut fit = |key: &'static str, configured: u64, share: u64, floor: u64| {
        let v = configured.min(share.max(floor));
        if v < configured {
            lowered.push((key, configured, v));
        }
        v
    };
    // Shared out: what [`unshared`] leaves (never less than a quarter).
    let shared = limit.saturating_sub(unshared(limit)).max(limit / 4);
    let part = |num: u64, den: u64| shared / den * num;
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
        limit / QUERY_SHARE,
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
        part(1, 10) / INSERT_BYTES_PER_POINT,
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

/// The memory this process's cgroup allows: the smallest limit of its cgroup and the cgroup's
/// ancestors (v2 `memory.max`, else v1 `memory.limit_in_bytes`), or none. The machine's
/// memory (`MemTotal`) counts as a limit only when it is smaller than every cgroup's.
/// The cgroup is found through `/proc/self/cgroup`, so the limit is found with or without a
/// cgroup namespace (a pod sees its own cgroup as the root; a process started under a
/// benchmark's cgroup does not).
pub fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let cgroup = limit_files(&own)
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        // cgroup v1 reports "no limit" as a number near 2^63 (v2 as "max", which does not parse).
        .filter(|&v| v < 1 << 60)
        .min();
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_total(&m));
    within_machine(cgroup, machine)
}

/// A cgroup's limit, or the machine's memory where that is smaller (or where there is no
/// limit and the machine has less than [`DEFAULT_BUDGET`]).
fn within_machine(cgroup: Option<u64>, machine: Option<u64>) -> Option<u64> {
    match (cgroup, machine) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (Some(c), None) => Some(c),
        (None, Some(m)) if m < DEFAULT_BUDGET => Some(m),
        (None, _) => None,
    }
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
    fn a_large_cgroup_keeps_the_configured_sizes() {
        let cfg = ServerConfig::default();
        let p = plan(&cfg, Some(24 * GIB));
        assert!(p.lowered.is_empty(), "{:?}", p.lowered);
        assert_eq!(p.wal_memtable_bytes, cfg.limits.wal_memtable_bytes.0);
        assert_eq!(p.pretouch_bytes, cfg.limits.pretouch_bytes.0);
    }

    #[test]
    fn without_a_limit_the_server_plans_for_the_default_budget() {
        let cfg = ServerConfig::default();
        assert_eq!(budget(&cfg, None), DEFAULT_BUDGET);
        assert_eq!(plan(&cfg, None), plan(&cfg, Some(DEFAULT_BUDGET)));
        let mut bigger = cfg.clone();
        bigger.limits.memory_bytes = ByteSize(8 * GIB);
        assert_eq!(
            budget(&bigger, None),
            8 * GIB,
            "a configured budget is kept"
        );
        assert_eq!(
            budget(&bigger, Some(2 * GIB)),
            2 * GIB,
            "a smaller cgroup wins"
        );
        assert_eq!(
            budget(&cfg, Some(3 * GIB)),
            3 * GIB,
            "the cgroup's limit is followed"
        );
        // The machine's memory counts only where it is smaller.
        assert_eq!(within_machine(None, Some(24 * GIB)), None);
        assert_eq!(within_machine(None, Some(512 * MIB)), Some(512 * MIB));
        assert_eq!(within_machine(Some(2 * GIB), Some(GIB)), Some(GIB));
        assert_eq!(within_machine(Some(GIB), Some(24 * GIB)), Some(GIB));
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
        // A sixteenth of what is shared out: the budget less the code pages and a third.
        let shared = GIB - unshared(GIB);
        assert_eq!(shared >> 20, 490);
        assert_eq!(p.wal_memtable_bytes, shared / 16);
        assert_eq!(p.max_points_per_batch, 401_954);
        // Under 512 MiB 149 MiB are shared out; inserts go down towards the floor.
        let small = plan(&cfg, Some(512 * MIB));
        assert_eq!(small.max_points_per_batch, 122_333);
        assert!(4 * small.wal_memtable_bytes + small.request_memory_bytes <= 96 * MIB);
        let mut configured = cfg.clone();
        configured.limits.memory_bytes = ByteSize(GIB);
        assert_eq!(
            plan(&configured, Some(24 * GIB)),
            p,
            "the configured budget is used"
        );
        assert_eq!(plan(&configured, None), p);
        assert_eq!(plan(&cfg, None), p, "no limit: the default budget");
        assert_eq!(p.request_memory_bytes, shared / 5);
        let mut applied = cfg.clone();
        apply(&p, &mut applied);
        assert_eq!(applied.limits.wal_memtable_bytes.0, shared / 16);
        assert_eq!(applied.pool.max_points_per_batch, 401_954);
        // The engine's tracker gets what the server does not hold itself.
        let engine = p.engine_memory_bytes();
        assert!(engine > 384 * MIB && engine < 448 * MIB, "{engine}");
        assert_eq!(
            p.query_memory_bytes,
            GIB / QUERY_SHARE,
            "each query: an eighth"
        );
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
