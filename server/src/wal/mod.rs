//! The write-ahead log: RocksDB on the local volume, one committer thread doing group commit.
//!
//! Request tasks encode their entries (the expensive part) and hand them to the committer
//! through a bounded queue; the committer drains whatever is queued into one RocksDB
//! `WriteBatch` written with `sync = true`, and only then answers the requests. One fsync thus
//! covers every request that arrived while the previous one ran, which is what makes durable
//! acknowledgement cheap under load.
//!
//! Layout (all keys in the default column family):
//! - `d` + u16 BE table-name length + table name + u64 BE sequence -> entry (see [`Entry`])
//! - `i` + table name -> flush intent: u64 BE first + u64 BE last sequence (see `flush`)
//! - `m` + name -> metadata (`last_seq`, databases created at run time)
//!
//! A data key exists exactly as long as its rows are not known to be in chDB.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use rocksdb::{Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB};
use sluice_core::MeasurementBatch;

mod space;
pub use space::should_reclaim;

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("write-ahead log queue is full ({0} requests waiting)")]
    QueueFull(usize),
    #[error("write-ahead log is shut down")]
    Closed,
    #[error("write-ahead log storage error: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("write-ahead log entry {key} is corrupt: {reason}")]
    Corrupt { key: String, reason: String },
}

/// One table's share of one request, already encoded by the request task.
#[derive(Debug, Clone)]
pub struct Entry {
    pub table: String,
    pub rows: u32,
    pub payload: Vec<u8>,
    /// The rows `payload` encodes, handed on to the flush so that it need not read and decode
    /// what the request task just encoded (see [`crate::flush::Scheduler`]).
    pub batch: Option<Arc<MeasurementBatch>>,
}

/// What the committer reports for each entry it made durable.
#[derive(Debug, Clone)]
pub struct CommittedEntry {
    pub table: String,
    pub seq: u64,
    pub rows: u32,
    pub bytes: u64,
    /// [`Entry::batch`]; `None` for entries read back from the log.
    pub batch: Option<Arc<MeasurementBatch>>,
}

/// A stored entry read back for flushing.
#[derive(Debug, Clone)]
pub struct StoredEntry {
    pub seq: u64,
    pub rows: u32,
    pub payload: Vec<u8>,
}

type Done = tokio::sync::oneshot::Sender<Result<(), Arc<WalError>>>;

struct Commit {
    entries: Vec<Entry>,
    done: Done,
}

/// Called by the committer, in sequence order, after each durable group commit.
pub type CommitListener = Box<dyn Fn(&[CommittedEntry]) + Send>;

/// Timings the committer reports, for metrics.
pub trait CommitObserver: Send + Sync {
    fn group_committed(&self, requests: usize, bytes: u64, seconds: f64);
}

pub struct Wal {
    db: Arc<DB>,
    tx: Mutex<Option<SyncSender<Commit>>>,
    queued: Arc<AtomicUsize>,
    capacity: usize,
    committer: Mutex<Option<JoinHandle<()>>>,
    last_seq: Arc<AtomicU64>,
    /// Per table, the highest sequence deleted since the last [`Wal::reclaim`]: the key ranges
    /// whose files hold entries that only a compaction frees.
    deleted: Mutex<std::collections::BTreeMap<String, u64>>,
}

const LAST_SEQ: &[u8] = b"mlast_seq";

fn data_prefix(table: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(3 + table.len() + 8);
    k.push(b'd');
    k.extend_from_slice(&(table.len() as u16).to_be_bytes());
    k.extend_from_slice(table.as_bytes());
    k
}

fn data_key(table: &str, seq: u64) -> Vec<u8> {
    let mut k = data_prefix(table);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// An intent's value: u64 BE first, u64 BE last.
fn decode_intent(table: &str, v: &[u8]) -> Result<(u64, u64), WalError> {
    match (v.get(..8), v.get(8..)) {
        (Some(first), Some(last)) if v.len() == 16 => Ok((
            u64::from_be_bytes(first.try_into().unwrap_or([0; 8])),
            u64::from_be_bytes(last.try_into().unwrap_or([0; 8])),
        )),
        _ => Err(WalError::Corrupt {
            key: format!("i{table}"),
            reason: "intent is not 16 bytes".into(),
        }),
    }
}

fn intent_key(table: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + table.len());
    k.push(b'i');
    k.extend_from_slice(table.as_bytes());
    k
}

/// Splits a data key into table and sequence.
fn parse_data_key(key: &[u8]) -> Option<(&str, u64)> {
    let rest = key.strip_prefix(b"d")?;
    let len = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let table = std::str::from_utf8(rest.get(2..2 + len)?).ok()?;
    let seq = u64::from_be_bytes(rest.get(2 + len..2 + len + 8)?.try_into().ok()?);
    Some((table, seq))
}

/// Stored value: u32 LE row count, then the payload.
fn encode_value(rows: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + payload.len());
    v.extend_from_slice(&rows.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn decode_value(key: &[u8], v: &[u8]) -> Result<(u32, Vec<u8>), WalError> {
    let rows = v.get(..4).ok_or_else(|| WalError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: "value shorter than its header".into(),
    })?;
    let rows = u32::from_le_bytes([rows[0], rows[1], rows[2], rows[3]]);
    Ok((rows, v[4..].to_vec()))
}

impl Wal {
    /// Opens (or creates) the log at `dir` and starts the committer thread, with the default
    /// memtable size.
    pub fn open(
        dir: &Path,
        queue_depth: usize,
        listener: CommitListener,
        observer: Arc<dyn CommitObserver>,
    ) -> Result<Self, WalError> {
        let memtable = sluice_core::config::LimitsConfig::default()
            .wal_memtable_bytes
            .0;
        Self::open_with(dir, queue_depth, memtable, listener, observer)
    }

    /// [`Wal::open`] with memtables of `memtable_bytes` (up to four are held in memory).
    pub fn open_with(
        dir: &Path,
        queue_depth: usize,
        memtable_bytes: u64,
        listener: CommitListener,
        observer: Arc<dyn CommitObserver>,
    ) -> Result<Self, WalError> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::None);
        // Entries normally live for about one flush interval. A memtable that is flushed after
        // most of its entries were range-deleted writes only the rest to an SST (flushing drops
        // deleted keys), so WAL data is written to disk about once (RocksDB's log), not twice.
        // Two sealed memtables are flushed together: the older one has by then aged a whole
        // fill time more. At 3.6 M points/s (160 MB/s into the log), with 256 MiB memtables
        // (the default), this cut what RocksDB's flush and compaction threads wrote from about
        // 1.4 GB to 0.4 GB per 30 s, for up to 1 GiB of memtables instead of 384 MiB.
        // `max_total_wal_size` must leave room for the unflushed memtables' logs, or it forces
        // flushes early.
        let memtable = memtable_bytes.max(sluice_core::config::MIN_WAL_MEMTABLE_BYTES.0);
        let memtable = usize::try_from(memtable).unwrap_or(usize::MAX);
        opts.set_write_buffer_size(memtable);
        opts.set_min_write_buffer_number_to_merge(2);
        opts.set_max_write_buffer_number(4);
        opts.set_max_total_wal_size(2 * memtable as u64);
        opts.set_max_background_jobs(2);
        opts.set_keep_log_file_num(4);
        // Log files are not reused (`recycle_log_file_num`), although a new file costs ext4
        // block allocation and, on a volume mounted with `discard`, a synchronous discard when
        // it is deleted: with RocksDB 7.8 reopening a database whose logs were reused looped
        // forever in the log reader (see the test `logs_that_rolled_over_replay_exactly_what_is_live`).
        let db = Arc::new(DB::open(&opts, dir)?);
        let last = db
            .get(LAST_SEQ)?
            .and_then(|v| {
                v.get(..8)
                    .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
            })
            .unwrap_or(0);
        let last_seq = Arc::new(AtomicU64::new(last));
        let (tx, rx) = mpsc::sync_channel::<Commit>(queue_depth);
        let queued = Arc::new(AtomicUsize::new(0));
        let committer = {
            let db = db.clone();
            let queued = queued.clone();
            let last_seq = last_seq.clone();
            std::thread::Builder::new()
                .name("wal-committer".into())
                .spawn(move || committer_loop(db, rx, queued, last_seq, listener, observer))
                .map_err(|e| WalError::Corrupt {
                    key: "-".into(),
                    reason: format!("cannot start committer thread: {e}"),
                })?
        };
        Ok(Self {
            db,
            tx: Mutex::new(Some(tx)),
            queued,
            capacity: queue_depth,
            committer: Mutex::new(Some(committer)),
            last_seq,
            deleted: Mutex::new(Default::default()),
        })
    }

    /// Queues entries for the next group commit. Fails at once when the queue is full, so the
    /// caller can answer 503 instead of waiting.
    pub fn submit(
        &self,
        entries: Vec<Entry>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<(), Arc<WalError>>>, WalError> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = tx.as_ref().ok_or(WalError::Closed)?;
        self.queued.fetch_add(1, Ordering::Relaxed);
        match tx.try_send(Commit { entries, done }) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                Err(WalError::QueueFull(self.capacity))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                Err(WalError::Closed)
            }
        }
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::Relaxed)
    }

    /// Every entry not yet flushed, in key order (table, then sequence): what a restart has to
    /// replay.
    pub fn pending(&self) -> Result<Vec<CommittedEntry>, WalError> {
        let mut out = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(b"d", Direction::Forward))
        {
            let (k, v) = item?;
            if !k.starts_with(b"d") {
                break;
            }
            let (table, seq) = parse_data_key(&k).ok_or_else(|| WalError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "malformed data key".into(),
            })?;
            let (rows, _) = decode_value(&k, &v[..v.len().min(4)])?;
            out.push(CommittedEntry {
                table: table.to_string(),
                seq,
                rows,
                bytes: v.len() as u64,
                batch: None,
            });
        }
        Ok(out)
    }

    /// Reads `table`'s oldest entries, at least one and then while the row total stays within
    /// `max_rows`, up to sequence `through` when given.
    pub fn read_batch(
        &self,
        table: &str,
        max_rows: u64,
        through: Option<u64>,
    ) -> Result<Vec<StoredEntry>, WalError> {
        let prefix = data_prefix(table);
        let mut out = Vec::new();
        let mut rows = 0u64;
        for item in self
            .db
            .iterator(IteratorMode::From(&prefix, Direction::Forward))
        {
            let (k, v) = item?;
            if !k.starts_with(&prefix) || k.len() != prefix.len() + 8 {
                break;
            }
            let seq = u64::from_be_bytes(k[prefix.len()..].try_into().unwrap_or([0; 8]));
            if let Some(last) = through {
                if seq > last {
                    break;
                }
            }
            let (n, payload) = decode_value(&k, &v)?;
            if !out.is_empty() && rows + n as u64 > max_rows {
                break;
            }
            rows += n as u64;
            out.push(StoredEntry {
                seq,
                rows: n,
                payload,
            });
        }
        Ok(out)
    }

    /// Durably records that `table`'s entries `first..=last` are about to be inserted, so that
    /// after a crash the same range is inserted again with the same deduplication token.
    pub fn set_intent(&self, table: &str, first: u64, last: u64) -> Result<(), WalError> {
        let mut v = Vec::with_capacity(16);
        v.extend_from_slice(&first.to_be_bytes());
        v.extend_from_slice(&last.to_be_bytes());
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.put_opt(intent_key(table), v, &wo)?;
        Ok(())
    }

    /// `table`'s intent, if one is left (by a crash, or by an insert that failed).
    pub fn intent(&self, table: &str) -> Result<Option<(u64, u64)>, WalError> {
        self.db
            .get(intent_key(table))?
            .map(|v| decode_intent(table, &v))
            .transpose()
    }

    /// Intents left by a previous run: ranges whose insert may or may not have reached chDB.
    pub fn intents(&self) -> Result<Vec<(String, u64, u64)>, WalError> {
        let mut out = Vec::new();
        for item in self
            .db
            .iterator(IteratorMode::From(b"i", Direction::Forward))
        {
            let (k, v) = item?;
            if !k.starts_with(b"i") {
                break;
            }
            let table = String::from_utf8_lossy(&k[1..]).into_owned();
            let (first, last) = decode_intent(&table, &v)?;
            out.push((table, first, last));
        }
        Ok(out)
    }

    /// The range is in chDB: delete its entries and its intent in one durable write.
    pub fn complete(&self, table: &str, first: u64, last: u64) -> Result<(), WalError> {
        let mut batch = WriteBatch::default();
        batch.delete_range(
            data_key(table, first),
            data_key(table, last.saturating_add(1)),
        );
        batch.delete(intent_key(table));
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo)?;
        let mut deleted = self.deleted.lock().unwrap_or_else(|p| p.into_inner());
        let upto = deleted.entry(table.to_owned()).or_default();
        *upto = (*upto).max(last);
        Ok(())
    }

    pub fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>, WalError> {
        let mut k = b"m".to_vec();
        k.extend_from_slice(name.as_bytes());
        Ok(self.db.get(k)?)
    }

    pub fn put_meta(&self, name: &str, value: &[u8]) -> Result<(), WalError> {
        let mut k = b"m".to_vec();
        k.extend_from_slice(name.as_bytes());
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.put_opt(k, value, &wo)?;
        Ok(())
    }

    /// Stops taking requests, lets the committer finish what is queued, and joins it.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let handle = self
            .committer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
}

/// Largest group commit, in payload bytes; one more request beyond it waits for the next.
const MAX_GROUP_BYTES: usize = 64 << 20;

fn committer_loop(
    db: Arc<DB>,
    rx: Receiver<Commit>,
    queued: Arc<AtomicUsize>,
    last_seq: Arc<AtomicU64>,
    listener: CommitListener,
    observer: Arc<dyn CommitObserver>,
) {
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    let mut seq = last_seq.load(Ordering::Relaxed);
    let mut group: Vec<Commit> = Vec::new();
    let mut committed: Vec<CommittedEntry> = Vec::new();
    while let Ok(first) = rx.recv() {
        let started = Instant::now();
        group.push(first);
        let mut bytes: usize = group[0].entries.iter().map(|e| e.payload.len()).sum();
        while bytes < MAX_GROUP_BYTES {
            match rx.try_recv() {
                Ok(c) => {
                    bytes += c.entries.iter().map(|e| e.payload.len()).sum::<usize>();
                    group.push(c);
                }
                Err(_) => break,
            }
        }
        queued.fetch_sub(group.len(), Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        committed.clear();
        for c in &group {
            for e in &c.entries {
                seq += 1;
                let value = encode_value(e.rows, &e.payload);
                committed.push(CommittedEntry {
                    table: e.table.clone(),
                    seq,
                    rows: e.rows,
                    bytes: value.len() as u64,
                    batch: e.batch.clone(),
                });
                batch.put(data_key(&e.table, seq), value);
            }
        }
        batch.put(LAST_SEQ, seq.to_be_bytes());
        let result = db
            .write_opt(batch, &wo)
            .map_err(|e| Arc::new(WalError::Rocks(e)));
        let n = group.len();
        if result.is_ok() {
            last_seq.store(seq, Ordering::Relaxed);
            listener(&committed);
        } else {
            // Nothing of this group is durable; the sequence numbers are reused.
            seq = last_seq.load(Ordering::Relaxed);
        }
        observer.group_committed(n, bytes as u64, started.elapsed().as_secs_f64());
        for c in group.drain(..) {
            let _ = c.done.send(result.clone());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    pub(super) struct NoObs;
    impl CommitObserver for NoObs {
        fn group_committed(&self, _: usize, _: u64, _: f64) {}
    }

    fn entry(table: &str, rows: u32, byte: u8) -> Entry {
        entry_of(table, rows, byte, 10)
    }

    pub(super) fn entry_of(table: &str, rows: u32, byte: u8, len: usize) -> Entry {
        Entry {
            table: table.into(),
            rows,
            payload: vec![byte; len],
            batch: None,
        }
    }

    #[tokio::test]
    async fn memtable_size_is_the_configured_one() {
        let dir = tempfile::tempdir().unwrap();
        let wal =
            Wal::open_with(dir.path(), 4, 8 << 20, Box::new(|_| {}), Arc::new(NoObs)).unwrap();
        wal.close();
        drop(wal);
        let options = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .unwrap();
        for line in [
            "write_buffer_size=8388608",
            "min_write_buffer_number_to_merge=2",
            "max_write_buffer_number=4",
            "max_total_wal_size=16777216",
            "recycle_log_file_num=0",
        ] {
            assert!(
                options.lines().any(|l| l.trim() == line),
                "{line} not in OPTIONS"
            );
        }
    }

    #[tokio::test]
    async fn commit_read_complete_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let wal = Wal::open(
            dir.path(),
            16,
            Box::new(move |c| s.lock().unwrap().extend(c.iter().map(|e| e.seq))),
            Arc::new(NoObs),
        )
        .unwrap();
        for i in 0..5u8 {
            let rx = wal
                .submit(vec![entry("a", 10, i), entry("b", 1, i)])
                .unwrap();
            rx.await.unwrap().unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), (1..=10).collect::<Vec<_>>());
        let batch = wal.read_batch("a", 25, None).unwrap();
        assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 3]);
        // At least one entry even when it alone exceeds the limit.
        assert_eq!(wal.read_batch("a", 1, None).unwrap().len(), 1);
        wal.set_intent("a", 1, 3).unwrap();
        wal.close();
        drop(wal);

        let wal = Wal::open(dir.path(), 16, Box::new(|_| {}), Arc::new(NoObs)).unwrap();
        assert_eq!(wal.last_seq(), 10);
        assert_eq!(wal.intents().unwrap(), vec![("a".to_string(), 1, 3)]);
        assert_eq!(wal.read_batch("a", u64::MAX, Some(3)).unwrap().len(), 2);
        wal.complete("a", 1, 3).unwrap();
        assert!(wal.intents().unwrap().is_empty());
        let pending = wal.pending().unwrap();
        let a: Vec<u64> = pending
            .iter()
            .filter(|e| e.table == "a")
            .map(|e| e.seq)
            .collect();
        assert_eq!(a, vec![5, 7, 9]);
        assert_eq!(pending.iter().filter(|e| e.table == "b").count(), 5);
        wal.close();
    }

    /// With small memtables, logs fill and roll over many times between reopens; every reopen
    /// must see exactly the entries written and not deleted. (With log reuse turned on, RocksDB
    /// 7.8 never returned from the second open.)
    #[tokio::test]
    async fn logs_that_rolled_over_replay_exactly_what_is_live() {
        let dir = tempfile::tempdir().unwrap();
        let mut live: Vec<u64> = Vec::new();
        for round in 0..4u8 {
            let wal =
                Wal::open_with(dir.path(), 64, 1 << 20, Box::new(|_| {}), Arc::new(NoObs)).unwrap();
            let stored: Vec<u64> = wal
                .read_batch("t", u64::MAX, None)
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect();
            assert_eq!(stored, live, "round {round}: replayed entries");
            for _ in 0..200 {
                let mut e = entry("t", 1, round);
                e.payload = vec![round; 32 << 10];
                wal.submit(vec![e]).unwrap().await.unwrap().unwrap();
                live.push(wal.last_seq());
            }
            // Delete all but the last few; they stay deleted across reopens.
            let keep = live.split_off(live.len() - 5);
            wal.set_intent("t", live[0], *live.last().unwrap()).unwrap();
            wal.complete("t", live[0], *live.last().unwrap()).unwrap();
            live = keep;
            wal.db.flush().unwrap();
            wal.close();
            drop(wal);
        }
        let logs = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .count();
        // 25 MB went through 1 MiB memtables: obsolete logs are deleted, not kept.
        assert!(logs <= 8, "{logs} log files");
    }

    #[test]
    fn data_keys_round_trip_and_sort_by_sequence() {
        let k1 = data_key("cpu", 9);
        let k2 = data_key("cpu", 10);
        assert!(k1 < k2);
        assert_eq!(parse_data_key(&k2), Some(("cpu", 10)));
        assert_eq!(parse_data_key(b"dxx"), None);
    }
}
