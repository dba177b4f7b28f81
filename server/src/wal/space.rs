//! The WAL's space on disk: measuring it and reclaiming what flushed entries left behind.
//!
//! A flushed range is removed with a range deletion, which costs nothing at the time but frees
//! nothing either: the entries stay in whatever SST files they were flushed to until a
//! compaction merges those files with the deletion. While the flush keeps up, entries are
//! deleted before their memtable is written out and never reach an SST. When it falls behind,
//! every memtable becomes an SST full of entries that are deleted a little later, and RocksDB's
//! own compactions (triggered by file counts, not by deleted bytes) let them pile up: a soak at
//! 2.5 M points/s grew the WAL directory by about 2 GB a minute past its live entries. So the
//! server watches the SST bytes against the live (unflushed) bytes and, when the dead ones pass
//! a bound, compacts the key ranges deleted since the last time. A table's entries are keyed by
//! sequence, so its deleted range is its oldest entries and the files holding them are mostly
//! dead: the compaction rewrites little that is live (compacting every key instead rewrote the
//! whole backlog, up to `limits.max_wal_backlog_bytes`, each time).

use std::path::Path;

use rocksdb::{BottommostLevelCompaction, CompactOptions};

use super::{data_key, Wal};

/// When to reclaim: the SST files hold more than the live entries plus `slack` (room for what is
/// normal: a flushed memtable or two whose deletions have not been compacted yet).
pub fn should_reclaim(sst_bytes: u64, live_bytes: u64, slack: u64) -> bool {
    sst_bytes > live_bytes.saturating_add(slack)
}

/// Bytes of every file under `dir` (the SSTs, the logs, the manifest): what the volume holds.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

impl Wal {
    /// Bytes on disk under the WAL's directory.
    pub fn disk_bytes(&self) -> u64 {
        dir_bytes(self.db.path())
    }

    /// Bytes in SST files (RocksDB's own count; 0 if it cannot tell).
    pub fn sst_bytes(&self) -> u64 {
        self.db
            .property_int_value("rocksdb.total-sst-files-size")
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// Writes the memtables out, so that RocksDB can drop the logs that held them (they are the
    /// rest of the directory once the SSTs are reclaimed).
    pub fn flush_memtables(&self) {
        if let Err(e) = self.db.flush() {
            tracing::warn!(error = %e, "could not write the WAL's memtables out");
        }
    }

    /// Compacts the key ranges deleted since the last call, dropping the entries that range
    /// deletions cover. Blocks for as long as that takes; runs beside the automatic compactions
    /// and memtable flushes, so writes continue meanwhile. Returns the tables compacted.
    pub fn reclaim(&self) -> usize {
        let deleted = std::mem::take(&mut *self.deleted.lock().unwrap_or_else(|p| p.into_inner()));
        let mut opts = CompactOptions::default();
        opts.set_exclusive_manual_compaction(false);
        // Files already in the last level are rewritten only when a deletion covers them.
        opts.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        for (table, upto) in &deleted {
            self.db.compact_range_opt(
                Some(data_key(table, 0)),
                Some(data_key(table, upto.saturating_add(1))),
                &opts,
            );
        }
        deleted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::tests::{entry_of, NoObs};
    use std::sync::Arc;

    #[test]
    fn reclaim_rule() {
        assert!(!should_reclaim(0, 0, 100));
        assert!(!should_reclaim(200, 100, 100));
        assert!(should_reclaim(201, 100, 100));
        assert!(!should_reclaim(u64::MAX, u64::MAX, u64::MAX));
    }

    /// With the flush behind, deleted entries stay on disk until `reclaim`, which frees them
    /// and keeps the live ones readable.
    #[tokio::test]
    async fn reclaim_frees_flushed_entries_and_keeps_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let wal =
            Wal::open_with(dir.path(), 64, 1 << 20, Box::new(|_| {}), Arc::new(NoObs)).unwrap();
        let tables = ["cpu", "disk", "mem"];
        // 3 tables x 60 entries x 64 KiB, each group written out to an SST as the memtables
        // of a flush that is behind would be.
        for round in 0..60u8 {
            let entries = tables
                .iter()
                .map(|t| entry_of(t, 1, round, 64 << 10))
                .collect();
            wal.submit(entries).unwrap().await.unwrap().unwrap();
            if round % 10 == 9 {
                wal.db.flush().unwrap();
            }
        }
        let written = wal.sst_bytes();
        assert!(written > 10 << 20, "only {written} bytes in SSTs");
        // Everything but the last entry of each table is flushed to chDB.
        let last = wal.last_seq();
        for (i, t) in tables.iter().enumerate() {
            wal.complete(t, 1, last - 3 + i as u64).unwrap();
        }
        wal.db.flush().unwrap();
        // Usually the deleted entries are all still on disk here; RocksDB's own compactions may
        // have dropped some (it depends on their timing), which is why the server reclaims.
        let before = wal.sst_bytes();
        assert_eq!(wal.reclaim(), 3);
        let after = wal.sst_bytes();
        assert!(
            after < 1 << 20,
            "{after} bytes left in SSTs (before: {before})"
        );
        assert!(wal.disk_bytes() >= after);
        let mut live: Vec<_> = wal
            .pending()
            .unwrap()
            .into_iter()
            .map(|e| e.table)
            .collect();
        live.sort();
        assert_eq!(live, vec!["cpu", "disk", "mem"]);
        for t in tables {
            let read = wal.read_batch(t, u64::MAX, None).unwrap();
            assert_eq!(read.len(), 1);
            assert_eq!(read[0].payload.len(), 64 << 10);
        }
        // Nothing deleted since: nothing to compact.
        assert_eq!(wal.reclaim(), 0);
    }
}
