//! The data volume: how much the WAL takes and how much is free, sampled by one thread that
//! also reclaims the WAL's space (see `wal::space`), so that writes stop before the volume
//! fills instead of failing half-way through a flush or a compaction.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_core::config::LimitsConfig;

use crate::flush::Scheduler;
use crate::metrics::Metrics;
use crate::wal::{should_reclaim, Wal};

/// How often the volume is measured: the WAL grows by at most a few hundred MB in that time.
const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// Least time between two reclaims: each compacts only what was deleted since the one before,
/// so they can be frequent; the WAL grows by the flush rate in between.
const RECLAIM_AT_MOST_EVERY: Duration = Duration::from_secs(4);

/// The last sample, read by the write path.
#[derive(Default)]
pub struct DiskWatch {
    wal_bytes: AtomicU64,
    /// `u64::MAX` until measured (and where the file system cannot tell).
    free_bytes: AtomicU64,
    /// The volume's size; `u64::MAX` until measured.
    total_bytes: AtomicU64,
    stop: AtomicBool,
}

/// Why writes must wait for the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskRefusal {
    WalTooLarge { bytes: u64, limit: u64 },
    VolumeFull { free: u64, min: u64 },
}

impl DiskRefusal {
    /// The backpressure metric's label.
    pub fn label(&self) -> &'static str {
        match self {
            DiskRefusal::WalTooLarge { .. } => "wal_disk",
            DiskRefusal::VolumeFull { .. } => "disk_free",
        }
    }
}

impl std::fmt::Display for DiskRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiskRefusal::WalTooLarge { bytes, limit } => write!(
                f,
                "the write-ahead log takes {bytes} bytes on disk, above limits.max_wal_disk_bytes ({limit}) while flushed entries are reclaimed; retry"
            ),
            DiskRefusal::VolumeFull { free, min } => write!(
                f,
                "the data volume has {free} bytes free, below limits.min_free_disk_bytes ({min}); retry"
            ),
        }
    }
}

impl DiskWatch {
    pub fn new() -> Self {
        Self {
            wal_bytes: AtomicU64::new(0),
            free_bytes: AtomicU64::new(u64::MAX),
            total_bytes: AtomicU64::new(u64::MAX),
            stop: AtomicBool::new(false),
        }
    }

    /// `Some` when writes must wait, judged on the last sample.
    pub fn refusal(&self, limits: &LimitsConfig) -> Option<DiskRefusal> {
        judge(
            self.wal_bytes.load(Ordering::Relaxed),
            Volume {
                free: self.free_bytes.load(Ordering::Relaxed),
                total: self.total_bytes.load(Ordering::Relaxed),
            },
            limits,
        )
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    fn record(&self, wal_bytes: u64, volume: Volume) {
        self.wal_bytes.store(wal_bytes, Ordering::Relaxed);
        self.free_bytes.store(volume.free, Ordering::Relaxed);
        self.total_bytes.store(volume.total, Ordering::Relaxed);
    }
}

/// Free and total bytes of a file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Volume {
    pub free: u64,
    pub total: u64,
}

/// The pure rule behind [`DiskWatch::refusal`]. The free-space floor is at most a tenth of the
/// volume, so that a small volume (a 1 GiB one cannot have 1 GiB free) still takes writes.
pub fn judge(wal_bytes: u64, volume: Volume, limits: &LimitsConfig) -> Option<DiskRefusal> {
    let min = limits.min_free_disk_bytes.0.min(volume.total / 10);
    if min > 0 && volume.free < min {
        return Some(DiskRefusal::VolumeFull {
            free: volume.free,
            min,
        });
    }
    let limit = limits.max_wal_disk_bytes.0;
    (wal_bytes > limit).then_some(DiskRefusal::WalTooLarge {
        bytes: wal_bytes,
        limit,
    })
}

/// Bytes available to an unprivileged writer on the file system holding `path`, and its size.
pub fn volume(path: &Path) -> Option<Volume> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` is written by statvfs before it is read.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some(Volume {
        free: st.f_bavail.saturating_mul(st.f_frsize),
        total: st.f_blocks.saturating_mul(st.f_frsize),
    })
}

/// What the watch thread works with.
pub struct Watched {
    pub watch: Arc<DiskWatch>,
    pub wal: Arc<Wal>,
    pub scheduler: Arc<Scheduler>,
    pub metrics: Arc<Metrics>,
    pub data_dir: PathBuf,
    /// Room for the SSTs of normal operation (see `wal::should_reclaim`).
    pub reclaim_slack: u64,
    pub limits: LimitsConfig,
}

/// Starts the thread that samples the volume every [`SAMPLE_EVERY`] and reclaims WAL space;
/// it ends after [`DiskWatch::stop`].
pub fn start(w: Watched) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("disk-watch".into())
        .spawn(move || watch_loop(w))
}

fn watch_loop(w: Watched) {
    let mut last_reclaim: Option<Instant> = None;
    while !w.watch.stop.load(Ordering::Acquire) {
        let before = sample(&w);
        let live = w.scheduler.backlog().bytes;
        let sst = w.wal.sst_bytes();
        let due = last_reclaim.is_none_or(|t| t.elapsed() >= RECLAIM_AT_MOST_EVERY);
        // Over the disk limit, reclaim whatever the rule says: with writes refused the
        // memtables no longer fill, so their logs would otherwise stay on disk for good.
        let over = matches!(
            w.watch.refusal(&w.limits),
            Some(DiskRefusal::WalTooLarge { .. })
        );
        if due && (over || should_reclaim(sst, live, w.reclaim_slack)) {
            let started = Instant::now();
            if over {
                w.wal.flush_memtables();
            }
            let tables = w.wal.reclaim();
            last_reclaim = Some(Instant::now());
            w.metrics.wal_reclaims.inc();
            let after = sample(&w);
            tracing::info!(
                before,
                after,
                live,
                tables,
                seconds = started.elapsed().as_secs_f64(),
                "reclaimed write-ahead log space left by flushed entries"
            );
        }
        // In short naps, so that shutdown does not wait for a whole period.
        let napped = Instant::now();
        while napped.elapsed() < SAMPLE_EVERY && !w.watch.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Measures, records and exports; returns the WAL's bytes on disk.
fn sample(w: &Watched) -> u64 {
    let wal_bytes = w.wal.disk_bytes();
    let vol = volume(&w.data_dir).unwrap_or(Volume {
        free: u64::MAX,
        total: u64::MAX,
    });
    w.watch.record(wal_bytes, vol);
    w.metrics.wal_disk_bytes.set(wal_bytes as i64);
    if vol.free != u64::MAX {
        w.metrics.data_free_bytes.set(vol.free as i64);
    }
    wal_bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::config::ByteSize;

    #[test]
    fn refusals_name_their_limit() {
        let mut l = LimitsConfig {
            max_wal_disk_bytes: ByteSize(1000),
            min_free_disk_bytes: ByteSize(500),
            ..LimitsConfig::default()
        };
        let big = |free| Volume {
            free,
            total: u64::MAX,
        };
        assert_eq!(judge(1000, big(500), &l), None);
        let r = judge(1001, big(u64::MAX), &l).unwrap();
        assert_eq!(r.label(), "wal_disk");
        assert!(
            r.to_string().contains("limits.max_wal_disk_bytes (1000)"),
            "{r}"
        );
        let r = judge(0, big(499), &l).unwrap();
        assert_eq!(r.label(), "disk_free");
        assert!(r.to_string().contains("499 bytes free"), "{r}");
        // On a volume of 2,000 bytes the floor is 200, not 500.
        let small = Volume {
            free: 300,
            total: 2000,
        };
        assert_eq!(judge(0, small, &l), None);
        let r = judge(0, Volume { free: 199, ..small }, &l).unwrap();
        assert!(r.to_string().contains("(200)"), "{r}");
        l.min_free_disk_bytes = ByteSize(0);
        assert_eq!(judge(0, big(0), &l), None);
    }

    #[test]
    fn volume_of_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let v = volume(dir.path()).unwrap();
        assert!(v.free > 0 && v.total >= v.free, "{v:?}");
        assert_eq!(volume(Path::new("/no/such/dir")), None);
    }
}
