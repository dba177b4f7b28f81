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
//! The rest (at least 30 %) is left to the engine: its inserts and merges, its caches and its
//! code. Pre-touched memory is not spent on top of the others: it is the allocator's, and
//! request and flush buffers are later carved out of it.

use sluice_core::config::{ByteSize, ServerConfig, MIN_WAL_MEMTABLE_BYTES};

use crate::flush::RETAINED_BYTES;

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
    /// Settings lowered to fit, as (key, configured, in force).
    pub lowered: Vec<(&'static str, u64, u64)>,
}

impl MemoryPlan {
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
    let part = |num: u64, den: u64| limit.map(|l| l / den * num);
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
    MemoryPlan {
        limit,
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
}

/// The memory this process may use: its cgroup's limit (v2 `memory.max`, else v1) when one is
/// set, else the machine's memory (`MemTotal`).
pub fn memory_limit() -> Option<u64> {
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .find_map(|v| v.trim().parse::<u64>().ok())
    // cgroup v1 reports "no limit" as a number near 2^63.
    .filter(|&v| v < 1 << 60);
    cgroup.or_else(|| mem_total(&std::fs::read_to_string("/proc/meminfo").ok()?))
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
        assert_eq!(p.wal_memtable_bytes, 64 * MIB);
        let mut configured = cfg.clone();
        configured.limits.memory_bytes = ByteSize(GIB);
        assert_eq!(
            plan(&configured, Some(24 * GIB)),
            p,
            "the configured budget is used"
        );
        assert_eq!(plan(&configured, None), p);
        assert_eq!(p.request_memory_bytes, GIB / 5);
        let mut applied = cfg.clone();
        apply(&p, &mut applied);
        assert_eq!(applied.limits.wal_memtable_bytes.0, 64 * MIB);
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
