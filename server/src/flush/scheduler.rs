//! Which tables have entries waiting to be flushed, which are due, and what the flush holds in
//! memory; also which tables keep failing, so that one table's trouble is seen and does not
//! hold up the others.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_core::{ColumnValues, MeasurementBatch};

use crate::catalog::SERIES_TABLE;
use crate::wal::CommittedEntry;

struct Pending {
    seq: u64,
    rows: u64,
    bytes: u64,
    at: Instant,
    /// The entry's rows, if kept in memory; `retained` is their size in the budget.
    batch: Option<Arc<MeasurementBatch>>,
    retained: u64,
}

/// Memory for batches kept between commit and a flush's Arrow columns: a few flush intervals at
/// 1 M points/s. Entries beyond it are read back from the WAL instead.
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
    /// Flush attempts that failed in a row, and the last one's error.
    failures: u32,
    last_error: String,
    bytes: u64,
}

/// A table whose last flush attempt failed.
#[derive(Debug, Clone, PartialEq)]
pub struct FailingTable {
    pub table: String,
    /// Attempts that failed in a row.
    pub failures: u32,
    pub error: String,
    /// Committed WAL bytes it holds.
    pub bytes: u64,
}

/// Longest wait between attempts at a table that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The wait after `failures` failures in a row: 1 s, doubling, at most [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.saturating_sub(1).min(6)).min(MAX_BACKOFF)
}

/// The series table instead of the due table `name` (through `last`) when the series table
/// holds rows committed with or before `name`'s newest entry: a read by tag or grouped by tags
/// finds a series' points only through its row, so the rows go in first. Flushed in their own
/// turn, they came up to a flush interval after the points (a test that wrote and then read at
/// once saw `SHOW SERIES` empty). Not while the series table is being flushed by another
/// worker, or waits out a failure: its trouble must not hold up the points.
fn series_first(st: &State, name: String, last: u64, now: Instant) -> (String, u64) {
    if name == SERIES_TABLE {
        return (name, last);
    }
    let (Some(series), Some(newest)) = (
        st.tables.get(SERIES_TABLE),
        st.tables.get(&name).and_then(|q| q.entries.back()),
    ) else {
        return (name, last);
    };
    let ready = !series.busy && series.retry_at.is_none_or(|r| r <= now);
    match (series.entries.front(), series.entries.back()) {
        (Some(oldest), Some(series_last)) if ready && oldest.at <= newest.at => {
            (SERIES_TABLE.to_string(), series_last.seq)
        }
        _ => (name, last),
    }
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
    /// `bytes` less what tables whose flush is failing hold: what backpressure counts.
    pub healthy_bytes: u64,
    pub oldest_age: Duration,
}

/// Batches taken for a flush ([`Scheduler::take_retained`]), empty when the flush must read
/// the WAL. Their bytes count in the scheduler's budget until this is dropped.
pub(super) struct Kept<'a> {
    pub batches: Vec<(u64, Arc<MeasurementBatch>)>,
    bytes: u64,
    scheduler: &'a Scheduler,
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        self.batches.clear();
        self.scheduler.lock().retained_bytes -= self.bytes;
    }
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
            q.bytes += e.bytes;
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
        let failing: u64 = st
            .tables
            .values()
            .filter(|q| q.failures > 0)
            .map(|q| q.bytes)
            .sum();
        Backlog {
            rows: st.total_rows,
            bytes: st.total_bytes,
            healthy_bytes: st.total_bytes - failing,
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
    pub(super) fn take(&self) -> Option<(String, u64)> {
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
                let (name, last) = series_first(&st, name, last, now);
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

    /// Takes the batches of what [`Flusher::flush_table`] would read from the WAL for `table`
    /// (the oldest entries through `through`, at least one and then within `max_rows`): all of
    /// them if every one was kept in memory, else none. Either way the range's batches leave
    /// the scheduler, so that while this flush runs the budget keeps what is committed next;
    /// their bytes stay counted until the returned [`Kept`] is dropped (the flush drops it as
    /// soon as its Arrow columns are built). A flush that fails reads the WAL on its retry.
    pub(super) fn take_retained(&self, table: &str, through: u64, max_rows: u64) -> Kept<'_> {
        let mut st = self.lock();
        let mut kept = Kept {
            batches: Vec::new(),
            bytes: 0,
            scheduler: self,
        };
        let mut all = true;
        if let Some(q) = st.tables.get_mut(table) {
            let mut rows = 0;
            for p in q.entries.iter_mut().take_while(|p| p.seq <= through) {
                if !kept.batches.is_empty() && rows + p.rows > max_rows {
                    break;
                }
                rows += p.rows;
                kept.bytes += std::mem::take(&mut p.retained);
                match p.batch.take() {
                    Some(b) => kept.batches.push((p.seq, b)),
                    None => all = false,
                }
            }
        }
        drop(st);
        if !all {
            kept.batches.clear();
        }
        kept
    }

    /// Whether every table with entries left has failed `failures` times in a row or more.
    pub fn only_failing_left(&self, failures: u32) -> bool {
        let st = self.lock();
        st.tables
            .values()
            .filter(|q| !q.entries.is_empty())
            .all(|q| q.failures >= failures)
    }

    /// Tables whose last flush attempt failed, by name.
    pub fn failing_tables(&self) -> Vec<FailingTable> {
        let st = self.lock();
        let mut out: Vec<FailingTable> = st
            .tables
            .iter()
            .filter(|(_, q)| q.failures > 0)
            .map(|(t, q)| FailingTable {
                table: t.clone(),
                failures: q.failures,
                error: q.last_error.clone(),
                bytes: q.bytes,
            })
            .collect();
        out.sort_by(|a, b| a.table.cmp(&b.table));
        out
    }

    /// The worker is done with `table`: entries through `last` are flushed (if `Some`);
    /// `failed` carries the error of a failed attempt, which backs the table off (1 s,
    /// doubling, at most a minute) while every other table goes on flushing.
    pub(super) fn release(
        &self,
        table: &str,
        flushed_through: Option<u64>,
        failed: Option<String>,
    ) {
        let mut st = self.lock();
        let mut freed_rows = 0;
        let mut freed_bytes = 0;
        let mut freed_retained = 0;
        if let Some(q) = st.tables.get_mut(table) {
            q.busy = false;
            match failed {
                Some(error) => {
                    q.failures = q.failures.saturating_add(1);
                    q.last_error = error;
                    q.retry_at = Some(Instant::now() + backoff(q.failures));
                }
                None => {
                    q.failures = 0;
                    q.last_error.clear();
                    q.retry_at = None;
                }
            }
            if let Some(last) = flushed_through {
                while q.entries.front().is_some_and(|p| p.seq <= last) {
                    if let Some(p) = q.entries.pop_front() {
                        q.rows -= p.rows;
                        q.bytes -= p.bytes;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_table_backs_off_is_reported_and_leaves_backpressure_to_the_others() {
        let s = Scheduler::new(1, Duration::from_millis(1), u64::MAX);
        let mut bad = entry(1, 10, false);
        bad.table = "bad".into();
        s.committed(&[bad, entry(2, 10, false)]);
        assert_eq!(s.backlog().healthy_bytes, 200);
        s.release("bad", None, Some("engine said no".into()));
        s.release("bad", None, Some("engine said no again".into()));
        let failing = s.failing_tables();
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].table, "bad");
        assert_eq!(failing[0].failures, 2);
        assert_eq!(failing[0].error, "engine said no again");
        assert_eq!(s.backlog().bytes, 200);
        assert_eq!(
            s.backlog().healthy_bytes,
            100,
            "the failing table's bytes are not counted"
        );
        // The other table is still handed out; the failing one waits for its backoff.
        let (table, _) = s.take().expect("a due table");
        assert_eq!(table, "t");
        s.release("bad", Some(1), None);
        assert!(s.failing_tables().is_empty());
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(4));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }

    #[test]
    fn series_rows_flush_before_the_points_committed_with_them() {
        // The points' oldest entry is older than the series row, which oldest-first alone
        // would flush after them; it came with their newest.
        let s = Scheduler::new(1_000, Duration::ZERO, u64::MAX);
        s.committed(&[entry(1, 10, false)]);
        std::thread::sleep(Duration::from_millis(2));
        let mut row = entry(3, 1, false);
        row.table = SERIES_TABLE.into();
        s.committed(&[entry(2, 10, false), row]);
        let (table, through) = s.take().expect("a due table");
        assert_eq!((table.as_str(), through), (SERIES_TABLE, 3));
        // The points wait neither for the series table's flush to end nor for its retries.
        assert_eq!(s.take().expect("the points"), ("t".to_string(), 2));
        s.release(SERIES_TABLE, None, Some("engine said no".into()));
        s.release("t", Some(2), None);
        s.committed(&[entry(4, 10, false)]);
        assert_eq!(s.take().expect("the points").0, "t");
        s.release("t", Some(4), None);
        // Rows committed after the points' newest entry do not jump ahead of them.
        let s = Scheduler::new(1_000, Duration::ZERO, u64::MAX);
        s.committed(&[entry(1, 10, false)]);
        std::thread::sleep(Duration::from_millis(2));
        let mut later = entry(2, 1, false);
        later.table = SERIES_TABLE.into();
        s.committed(&[later]);
        assert_eq!(s.take().expect("the points").0, "t");
    }

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

    fn seqs(kept: Kept<'_>) -> Option<Vec<u64>> {
        let s: Vec<u64> = kept.batches.iter().map(|(s, _)| *s).collect();
        (!s.is_empty()).then_some(s)
    }

    /// Three kept entries, 40 rows each, at sequences 1, 3 and 7.
    fn three(s: &Scheduler) {
        s.committed(&[entry(1, 40, true), entry(3, 40, true), entry(7, 40, true)]);
    }

    #[test]
    fn retained_batches_cover_what_the_wal_read_would() {
        // At least one entry, then within max_rows, and never past `through`.
        for (through, max_rows, want) in [
            (7, 100, Some(vec![1, 3])),
            (7, 10, Some(vec![1])),
            (1, 100, Some(vec![1])),
        ] {
            let s = Scheduler::new(100, Duration::from_secs(1), u64::MAX);
            three(&s);
            assert_eq!(seqs(s.take_retained("t", through, max_rows)), want);
        }
        let s = Scheduler::new(100, Duration::from_secs(1), u64::MAX);
        three(&s);
        assert_eq!(seqs(s.take_retained("other", 7, 100)), None);
        s.release("t", Some(3), None);
        assert_eq!(seqs(s.take_retained("t", 7, 100)), Some(vec![7]));
    }

    #[test]
    fn one_entry_not_kept_sends_the_flush_to_the_wal() {
        let s = Scheduler::new(1000, Duration::from_secs(1), u64::MAX);
        s.committed(&[entry(1, 10, true), entry(2, 10, false), entry(3, 10, true)]);
        assert_eq!(seqs(s.take_retained("t", 3, 1000)), None);
        assert_eq!(
            seqs(s.take_retained("t", 3, 1000)),
            None,
            "the range's batches were let go: a retry reads the WAL"
        );
        assert_eq!(s.lock().retained_bytes, 0);
    }

    #[test]
    fn the_memory_budget_holds_and_is_given_back() {
        let one = batch_bytes(&batch(10));
        let s = Scheduler::new(1000, Duration::from_secs(1), 2 * one);
        s.committed(&[entry(1, 10, true), entry(2, 10, true), entry(3, 10, true)]);
        assert_eq!(s.lock().retained_bytes, 2 * one);
        let kept = s.take_retained("t", 2, 1000);
        assert_eq!(kept.batches.len(), 2);
        s.committed(&[entry(4, 10, true)]);
        assert_eq!(
            s.lock().retained_bytes,
            2 * one,
            "taken batches count until the flush lets them go"
        );
        drop(kept);
        assert_eq!(s.lock().retained_bytes, 0);
        s.committed(&[entry(5, 10, true), entry(6, 10, true)]);
        assert_eq!(
            s.lock().retained_bytes,
            2 * one,
            "the freed budget keeps 5 and 6"
        );
        s.release("t", Some(2), None);
        assert_eq!(
            seqs(s.take_retained("t", 6, 1000)),
            None,
            "3 and 4 were over budget"
        );
        s.release("t", Some(6), None);
        assert_eq!(s.lock().retained_bytes, 0);
        s.committed(&[entry(7, 10, true)]);
        assert_eq!(seqs(s.take_retained("t", 7, 1000)), Some(vec![7]));
    }
}
