//! Moves committed WAL entries into chDB, exactly once.
//!
//! The scheduler keeps, per table, the entries committed but not flushed (sequence, rows,
//! bytes, commit time). A table is due when it has `max_points_per_batch` rows pending or its
//! oldest entry is older than `flush_interval` (or always, while draining). A worker takes a
//! due table, reads its oldest entries from the WAL, and:
//!
//! 1. durably records the intent `(table, first, last)`;
//! 2. inserts the rows, each carrying its entry's sequence number (`_sluice_seq`), with the
//!    deduplication token `table/first-last`;
//! 3. deletes the entries and the intent in one durable write.
//!
//! The rows themselves normally come from memory, not the WAL: the request task hands its
//! parsed batch on with the entry ([`crate::wal::Entry::batch`]), and the scheduler keeps it
//! until the flush, within [`RETAINED_BYTES`]. Reading the entries back from RocksDB and
//! decoding them cost about a quarter of the flush worker. The WAL is still read when a batch
//! was not kept (after a restart, over the memory bound, the series table) and whenever an
//! interrupted flush is settled.
//!
//! An intent still there later (the process died, or the insert failed) is resolved before the
//! table is flushed again (see [`Flusher::resolve_intent`]): the table is asked which entries of
//! the range it already holds, by their sequence numbers, and exactly the others are inserted.
//! chDB's own deduplication log is not trusted for this: it records an insert's token before
//! the insert's part is committed, and that record can reach the disk first, so a crash in
//! between would make a replay under the same token look like a duplicate and drop it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chdb_rust::format::OutputFormat;
use sluice_core::names::quote_ident;
use sluice_core::{ColumnValues, MeasurementBatch};

use crate::arrow_batch;
use crate::catalog::{SEQ_COLUMN, SERIES_TABLE};
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::payload::{self, Payload};
use crate::wal::{CommittedEntry, StoredEntry, Wal};

#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("reading the WAL: {0}")]
    Wal(#[from] crate::wal::WalError),
    #[error("decoding WAL entry {seq} of {table}: {source}")]
    Payload {
        table: String,
        seq: u64,
        source: payload::PayloadError,
    },
    #[error("WAL entries of {table} mix payload kinds")]
    MixedKinds { table: String },
    #[error("building the Arrow batch for {table}: {source}")]
    Arrow {
        table: String,
        source: chdb_rust::arrow::error::ArrowError,
    },
    #[error("asking {table} which entries it holds: {source}")]
    Check {
        table: String,
        source: crate::engine::EngineError,
    },
    #[error("inserting into {table}: {source}")]
    Insert {
        table: String,
        source: crate::engine::EngineError,
    },
}

struct Pending {
    seq: u64,
    rows: u64,
    bytes: u64,
    at: Instant,
    /// The entry's rows, if kept in memory; `retained` is their size in the budget.
    batch: Option<Arc<MeasurementBatch>>,
    retained: u64,
}

/// Memory for batches kept between commit and flush: a few flush intervals at 1 M points/s.
/// Entries beyond it are read back from the WAL instead.
pub const RETAINED_BYTES: u64 = 256 << 20;

/// Approximate heap size of a batch, for the budget.
fn batch_bytes(b: &MeasurementBatch) -> u64 {
    let rows = b.len() as u64;
    let columns: u64 = b
        .fields
        .iter()
        .map(|c| {
            let values = match &c.values {
                ColumnValues::Float(v) => v.len() * 8,
                ColumnValues::Integer(v) => v.len() * 8,
                ColumnValues::UInteger(v) => v.len() * 8,
                ColumnValues::Boolean(v) => v.len(),
                ColumnValues::String(s) => s.offsets.len() * 4 + s.data.len(),
            };
            (values + c.valid.len()) as u64
        })
        .sum();
    rows * 16 + columns
}

#[derive(Default)]
struct TableQueue {
    entries: VecDeque<Pending>,
    rows: u64,
    busy: bool,
    /// Not before this instant (backoff after a failure).
    retry_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    tables: HashMap<String, TableQueue>,
    /// Flush everything regardless of thresholds (start-up replay, shutdown).
    draining: bool,
    stopping: bool,
    total_rows: u64,
    total_bytes: u64,
    retained_bytes: u64,
}

/// Shared between the WAL committer (which adds), the workers (which take) and the HTTP layer
/// (which reads the backlog for backpressure and metrics).
pub struct Scheduler {
    state: Mutex<State>,
    wake: Condvar,
    max_rows: u64,
    interval: Duration,
    retain_budget: u64,
}

/// Backlog numbers for metrics and backpressure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Backlog {
    pub rows: u64,
    pub bytes: u64,
    pub oldest_age: Duration,
}

impl Scheduler {
    /// `retain_budget` bounds the memory of batches kept for the flush ([`RETAINED_BYTES`]).
    pub fn new(max_rows: u64, interval: Duration, retain_budget: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            max_rows: max_rows.max(1),
            interval,
            retain_budget,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records entries the committer made durable (in sequence order).
    pub fn committed(&self, entries: &[CommittedEntry]) {
        let now = Instant::now();
        let mut st = self.lock();
        let mut due = false;
        for e in entries {
            let mut retained = 0;
            let batch = e.batch.clone().filter(|b| {
                retained = batch_bytes(b);
                st.retained_bytes + retained <= self.retain_budget
            });
            if batch.is_none() {
                retained = 0;
            }
            st.retained_bytes += retained;
            let q = st.tables.entry(e.table.clone()).or_default();
            q.entries.push_back(Pending {
                seq: e.seq,
                rows: e.rows as u64,
                bytes: e.bytes,
                at: now,
                batch,
                retained,
            });
            q.rows += e.rows as u64;
            due |= q.rows >= self.max_rows;
            st.total_rows += e.rows as u64;
            st.total_bytes += e.bytes;
        }
        drop(st);
        if due {
            self.wake.notify_all();
        }
    }

    pub fn backlog(&self) -> Backlog {
        let st = self.lock();
        let oldest = st
            .tables
            .values()
            .filter_map(|q| q.entries.front().map(|p| p.at))
            .min();
        Backlog {
            rows: st.total_rows,
            bytes: st.total_bytes,
            oldest_age: oldest.map(|t| t.elapsed()).unwrap_or_default(),
        }
    }

    /// Makes every table due until [`Scheduler::stop_draining`].
    pub fn drain(&self) {
        self.lock().draining = true;
        self.wake.notify_all();
    }

    pub fn stop_draining(&self) {
        self.lock().draining = false;
    }

    /// Asks the workers to exit once nothing is in flight.
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_all();
    }

    /// Blocks until nothing is pending or `timeout` passes; returns whether it emptied.
    pub fn wait_empty(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        while st.total_rows > 0 || st.tables.values().any(|q| q.busy) {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let (g, _) = self
                .wake
                .wait_timeout(st, (deadline - now).min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner());
            st = g;
        }
        true
    }

    /// The next due table, marked busy, with the last sequence the scheduler knows for it (a
    /// worker must not flush past it: the committer may not have reported later entries yet).
    fn take(&self) -> Option<(String, u64)> {
        let mut st = self.lock();
        loop {
            if st.stopping {
                return None;
            }
            let now = Instant::now();
            let mut next_check = self.interval;
            let mut pick: Option<(String, Instant, u64)> = None;
            for (name, q) in st.tables.iter() {
                let Some(front) = q.entries.front() else {
                    continue;
                };
                if q.busy {
                    continue;
                }
                if let Some(r) = q.retry_at {
                    if r > now {
                        next_check = next_check.min(r - now);
                        continue;
                    }
                }
                let age = now.duration_since(front.at);
                let due = st.draining || q.rows >= self.max_rows || age >= self.interval;
                if due {
                    // Oldest first, so no table starves.
                    if pick.as_ref().is_none_or(|(_, at, _)| front.at < *at) {
                        let last = q.entries.back().map_or(front.seq, |p| p.seq);
                        pick = Some((name.clone(), front.at, last));
                    }
                } else {
                    next_check = next_check.min(self.interval - age);
                }
            }
            if let Some((name, _, last)) = pick {
                if let Some(q) = st.tables.get_mut(&name) {
                    q.busy = true;
                }
                return Some((name, last));
            }
            let (g, _) = self
                .wake
                .wait_timeout(st, next_check.max(Duration::from_millis(1)))
                .unwrap_or_else(|p| p.into_inner());
            st = g;
        }
    }

    /// The batches of what [`Flusher::flush_table`] would read from the WAL for `table` (the
    /// oldest entries through `through`, at least one and then within `max_rows`), if every
    /// one of them was kept in memory.
    fn retained(
        &self,
        table: &str,
        through: u64,
        max_rows: u64,
    ) -> Option<Vec<(u64, Arc<MeasurementBatch>)>> {
        let st = self.lock();
        let q = st.tables.get(table)?;
        let mut out = Vec::new();
        let mut rows = 0;
        for p in q.entries.iter().take_while(|p| p.seq <= through) {
            if !out.is_empty() && rows + p.rows > max_rows {
                break;
            }
            rows += p.rows;
            out.push((p.seq, p.batch.clone()?));
        }
        (!out.is_empty()).then_some(out)
    }

    /// The worker is done with `table`: entries through `last` are flushed (if `Some`).
    fn release(&self, table: &str, flushed_through: Option<u64>, failed: bool) {
        let mut st = self.lock();
        let mut freed_rows = 0;
        let mut freed_bytes = 0;
        let mut freed_retained = 0;
        if let Some(q) = st.tables.get_mut(table) {
            q.busy = false;
            q.retry_at = failed.then(|| Instant::now() + Duration::from_secs(1));
            if let Some(last) = flushed_through {
                while q.entries.front().is_some_and(|p| p.seq <= last) {
                    if let Some(p) = q.entries.pop_front() {
                        q.rows -= p.rows;
                        freed_rows += p.rows;
                        freed_bytes += p.bytes;
                        freed_retained += p.retained;
                    }
                }
            }
        }
        st.total_rows -= freed_rows;
        st.total_bytes -= freed_bytes;
        st.retained_bytes -= freed_retained;
        drop(st);
        self.wake.notify_all();
    }
}

/// What a flush needs besides the scheduler.
pub struct Flusher {
    pub wal: Arc<Wal>,
    pub engine: Arc<Engine>,
    pub metrics: Arc<Metrics>,
    pub max_rows: u64,
}

impl Flusher {
    /// Inserts `rows` (consecutive entries, oldest first) of `table` and truncates them from
    /// the WAL.
    fn flush_entries(&self, table: &str, rows: Rows<'_>) -> Result<u64, FlushError> {
        let (Some(first), Some(last)) = (rows.first_seq(), rows.last_seq()) else {
            return Ok(0);
        };
        self.wal.set_intent(table, first, last)?;
        self.insert_range(table, rows, first, last, true)?;
        Ok(last)
    }

    /// Inserts `entries` and deletes the range `first..=last` (and its intent) from the WAL.
    /// The intent for exactly `first..=last` must already be durable. `dedup` sends the
    /// range's token; recovery, which has checked what the table holds, inserts without one.
    fn insert_range(
        &self,
        table: &str,
        rows: Rows<'_>,
        first: u64,
        last: u64,
        dedup: bool,
    ) -> Result<(), FlushError> {
        let started = Instant::now();
        let batch = match rows {
            Rows::Stored(entries) => build_batch(table, entries)?,
            Rows::Retained(batches) => {
                let (seqs, batches): (Vec<u64>, Vec<&MeasurementBatch>) =
                    batches.iter().map(|(s, b)| (*s, &**b)).unzip();
                arrow_batch::measurement_batches(&batches, &seqs).map_err(|source| {
                    FlushError::Arrow {
                        table: table.to_string(),
                        source,
                    }
                })?
            }
        };
        let rows = batch.num_rows() as u64;
        self.metrics
            .observe_stage("arrow", started.elapsed().as_secs_f64());
        let token = format!("{table}/{first}-{last}");
        let insert_started = Instant::now();
        self.engine
            .insert(table, batch, dedup.then_some(token.as_str()))
            .map_err(|source| FlushError::Insert {
                table: table.to_string(),
                source,
            })?;
        self.metrics
            .observe_stage("chdb_insert", insert_started.elapsed().as_secs_f64());
        self.wal.complete(table, first, last)?;
        self.metrics
            .observe_stage("flush", started.elapsed().as_secs_f64());
        if table != SERIES_TABLE {
            self.metrics.points_flushed.inc_by(rows);
        }
        Ok(())
    }

    /// Settles the interrupted flush of `first..=last`: inserts exactly the entries `table`
    /// does not hold yet, then deletes the range.
    pub fn resolve_intent(&self, table: &str, first: u64, last: u64) -> Result<(), FlushError> {
        let entries: Vec<StoredEntry> = self
            .wal
            .read_batch(table, u64::MAX, Some(last))?
            .into_iter()
            .filter(|e| e.seq >= first)
            .collect();
        if entries.is_empty() {
            self.wal.complete(table, first, last)?;
            return Ok(());
        }
        // The series table is a ReplacingMergeTree keyed by the series: a row inserted twice is
        // one row after merges and under FINAL, so it is simply inserted again.
        let missing: Vec<StoredEntry> = if table == SERIES_TABLE {
            entries
        } else {
            let present = self.present_seqs(table, first, last)?;
            entries
                .into_iter()
                .filter(|e| !present.contains(&e.seq))
                .collect()
        };
        tracing::info!(
            table,
            first,
            last,
            missing = missing.len(),
            "settling an interrupted flush"
        );
        if missing.is_empty() {
            self.wal.complete(table, first, last)?;
            return Ok(());
        }
        self.insert_range(table, Rows::Stored(&missing), first, last, false)
    }

    /// The sequence numbers in `first..=last` that `table` holds rows of.
    fn present_seqs(&self, table: &str, first: u64, last: u64) -> Result<HashSet<u64>, FlushError> {
        let sql = format!(
            "SELECT DISTINCT {seq} FROM {} WHERE {seq} BETWEEN {first} AND {last}",
            quote_ident(table),
            seq = quote_ident(SEQ_COLUMN),
        );
        let out = self
            .engine
            .query(&sql, OutputFormat::TabSeparated)
            .map_err(|source| FlushError::Check {
                table: table.to_string(),
                source,
            })?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect())
    }

    /// One round for `table`: settle a left-over intent, read up to `max_rows`, flush. Returns
    /// the last flushed sequence.
    fn flush_table(
        &self,
        table: &str,
        through: u64,
        scheduler: &Scheduler,
    ) -> Result<Option<u64>, FlushError> {
        if let Some((first, last)) = self.wal.intent(table)? {
            self.resolve_intent(table, first, last)?;
        } else if let Some(kept) = scheduler
            .retained(table, through, self.max_rows)
            .filter(|kept| kept.iter().all(|(_, b)| b.validate().is_ok()))
        {
            // The scheduler's entries are exactly the table's entries in the WAL unless an
            // intent was just settled (that deletes entries the scheduler still lists), so
            // its batches are what the WAL would return.
            return self.flush_entries(table, Rows::Retained(&kept)).map(Some);
        }
        let entries = self.wal.read_batch(table, self.max_rows, Some(through))?;
        if entries.is_empty() {
            // Nothing stored through `through`: the scheduler's entries are stale.
            return Ok(Some(through));
        }
        self.flush_entries(table, Rows::Stored(&entries)).map(Some)
    }
}

/// Where the rows of a flush come from.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// Read back from the WAL.
    Stored(&'a [StoredEntry]),
    /// Kept in memory since the commit: (sequence, batch).
    Retained(&'a [(u64, Arc<MeasurementBatch>)]),
}

impl Rows<'_> {
    fn first_seq(&self) -> Option<u64> {
        match self {
            Rows::Stored(e) => e.first().map(|e| e.seq),
            Rows::Retained(b) => b.first().map(|b| b.0),
        }
    }

    fn last_seq(&self) -> Option<u64> {
        match self {
            Rows::Stored(e) => e.last().map(|e| e.seq),
            Rows::Retained(b) => b.last().map(|b| b.0),
        }
    }
}

/// Settles the flushes a previous run left unfinished (see [`Flusher::resolve_intent`]).
pub fn recover_intents(flusher: &Flusher) -> Result<usize, FlushError> {
    let intents = flusher.wal.intents()?;
    for (table, first, last) in &intents {
        flusher.resolve_intent(table, *first, *last)?;
    }
    Ok(intents.len())
}

/// Decodes a table's entries and coalesces them into one Arrow batch.
fn build_batch(
    table: &str,
    entries: &[StoredEntry],
) -> Result<chdb_rust::arrow::array::RecordBatch, FlushError> {
    let mut measurements: Vec<MeasurementBatch> = Vec::new();
    let mut seqs = Vec::new();
    let mut series = Vec::new();
    for e in entries {
        match payload::decode(&e.payload).map_err(|source| FlushError::Payload {
            table: table.to_string(),
            seq: e.seq,
            source,
        })? {
            Payload::Measurement(b) => {
                measurements.push(b);
                seqs.push(e.seq);
            }
            Payload::Series(rows) => series.extend(rows),
        }
    }
    let is_series = table == SERIES_TABLE;
    if (is_series && !measurements.is_empty()) || (!is_series && !series.is_empty()) {
        return Err(FlushError::MixedKinds {
            table: table.into(),
        });
    }
    if is_series {
        arrow_batch::series_batch(&series)
    } else {
        arrow_batch::measurement_batches(&measurements, &seqs)
    }
    .map_err(|source| FlushError::Arrow {
        table: table.to_string(),
        source,
    })
}

/// CPU priority (Linux nice) of the flush workers, and of the chDB threads their inserts run
/// on. A flush of a million points takes about a tenth of a second of CPU in one burst; at
/// the request path's priority those bursts set its p95 latency. Below it, a flush waits for
/// idle CPU instead: acknowledged data is already durable in the WAL, and if flushing falls
/// behind for long the WAL backlog limit pushes back on writers (503), as before.
pub const FLUSH_NICE: i32 = 5;

/// Starts `n` worker threads.
pub fn start_workers(
    n: usize,
    scheduler: Arc<Scheduler>,
    flusher: Arc<Flusher>,
) -> Vec<JoinHandle<()>> {
    (0..n.max(1))
        .filter_map(|i| {
            let scheduler = scheduler.clone();
            let flusher = flusher.clone();
            std::thread::Builder::new()
                .name(format!("flush-{i}"))
                .spawn(move || {
                    crate::priority::lower_thread_priority(FLUSH_NICE);
                    while let Some((table, through)) = scheduler.take() {
                        match flusher.flush_table(&table, through, &scheduler) {
                            Ok(last) => scheduler.release(&table, last, false),
                            Err(e) => {
                                tracing::error!(table, error = %e, "flush failed; will retry");
                                flusher
                                    .metrics
                                    .flush_failures
                                    .with_label_values(&[&table])
                                    .inc();
                                if matches!(e, FlushError::Insert { .. }) {
                                    flusher
                                        .metrics
                                        .chdb_errors
                                        .with_label_values(&["insert"])
                                        .inc();
                                }
                                scheduler.release(&table, None, true);
                            }
                        }
                    }
                })
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rows: usize) -> Arc<MeasurementBatch> {
        let mut b = MeasurementBatch::new("cpu".into());
        b.time_ns = (0..rows as i64).collect();
        b.series_id = vec![1; rows];
        Arc::new(b)
    }

    fn entry(seq: u64, rows: usize, kept: bool) -> CommittedEntry {
        CommittedEntry {
            table: "t".into(),
            seq,
            rows: rows as u32,
            bytes: rows as u64 * 10,
            batch: kept.then(|| batch(rows)),
        }
    }

    fn seqs(kept: Option<Vec<(u64, Arc<MeasurementBatch>)>>) -> Option<Vec<u64>> {
        kept.map(|k| k.into_iter().map(|(s, _)| s).collect())
    }

    #[test]
    fn retained_batches_cover_what_the_wal_read_would() {
        let s = Scheduler::new(100, Duration::from_secs(1), u64::MAX);
        s.committed(&[entry(1, 40, true), entry(3, 40, true), entry(7, 40, true)]);
        // At least one entry, then within max_rows, and never past `through`.
        assert_eq!(seqs(s.retained("t", 7, 100)), Some(vec![1, 3]));
        assert_eq!(seqs(s.retained("t", 7, 10)), Some(vec![1]));
        assert_eq!(seqs(s.retained("t", 1, 100)), Some(vec![1]));
        assert_eq!(seqs(s.retained("other", 7, 100)), None);
        s.release("t", Some(3), false);
        assert_eq!(seqs(s.retained("t", 7, 100)), Some(vec![7]));
    }

    #[test]
    fn one_entry_not_kept_sends_the_flush_to_the_wal() {
        let s = Scheduler::new(1000, Duration::from_secs(1), u64::MAX);
        s.committed(&[entry(1, 10, true), entry(2, 10, false), entry(3, 10, true)]);
        assert_eq!(seqs(s.retained("t", 1, 1000)), Some(vec![1]));
        assert_eq!(seqs(s.retained("t", 3, 1000)), None);
    }

    #[test]
    fn the_memory_budget_holds_and_is_given_back() {
        let one = batch_bytes(&batch(10));
        let s = Scheduler::new(1000, Duration::from_secs(1), 2 * one);
        s.committed(&[entry(1, 10, true), entry(2, 10, true), entry(3, 10, true)]);
        assert_eq!(s.lock().retained_bytes, 2 * one);
        assert_eq!(seqs(s.retained("t", 2, 1000)), Some(vec![1, 2]));
        assert_eq!(
            seqs(s.retained("t", 3, 1000)),
            None,
            "the third was over budget"
        );
        s.release("t", Some(3), false);
        assert_eq!(s.lock().retained_bytes, 0);
        s.committed(&[entry(4, 10, true)]);
        assert_eq!(seqs(s.retained("t", 4, 1000)), Some(vec![4]));
    }
}
