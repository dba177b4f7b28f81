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
//! until the flush, within [`RETAINED_BYTES`]; a flush takes its batches out of the budget's
//! keeping and lets them go once their Arrow columns are built, so the budget holds what is
//! committed while inserts run (on the 1 GiB default two inserts' batches fill all of it).
//! Reading the entries back from RocksDB and decoding them cost about a quarter of the flush
//! worker. The WAL is still read when a batch was not kept (after a restart, over the memory
//! bound, the series table) and whenever an interrupted flush is settled.
//!
//! An intent still there later (the process died, or the insert failed) is resolved before the
//! table is flushed again (see [`Flusher::resolve_intent`]): the table is asked which entries of
//! the range it already holds, by their sequence numbers, and exactly the others are inserted.
//! chDB's own deduplication log is not trusted for this: it records an insert's token before
//! the insert's part is committed, and that record can reach the disk first, so a crash in
//! between would make a replay under the same token look like a duplicate and drop it.

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use chdb_rust::format::OutputFormat;
use sluice_core::names::quote_ident;
use sluice_core::MeasurementBatch;

use crate::arrow_batch;
use crate::catalog::{SEQ_COLUMN, SERIES_TABLE};
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::payload::{self, Payload};
use crate::wal::{StoredEntry, Wal};

mod scheduler;

use scheduler::Kept;
pub use scheduler::{Backlog, FailingTable, Scheduler, RETAINED_BYTES};

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
        let read_back = matches!(rows, Rows::Stored(_));
        let batch = match rows {
            Rows::Stored(entries) => build_batch(table, entries)?,
            // The kept batches are dropped here, once their columns are built: the insert's
            // memory is the engine's, and the budget takes the next entries meanwhile.
            Rows::Retained(kept) => {
                let (seqs, batches): (Vec<u64>, Vec<&MeasurementBatch>) =
                    kept.batches.iter().map(|(s, b)| (*s, &**b)).unzip();
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
        let inserted = self
            .engine
            .insert(table, batch, dedup.then_some(token.as_str()));
        if table == SERIES_TABLE {
            // Done or failed, some of its rows may be visible now.
            self.engine.series_written();
        }
        inserted.map_err(|source| FlushError::Insert {
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
            if read_back {
                self.metrics.points_read_back.inc_by(rows);
            }
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
        } else {
            let kept = scheduler.take_retained(table, through, self.max_rows);
            if !kept.batches.is_empty() && kept.batches.iter().all(|(_, b)| b.validate().is_ok()) {
                // The scheduler's entries are exactly the table's entries in the WAL unless an
                // intent was just settled (that deletes entries the scheduler still lists), so
                // its batches are what the WAL would return.
                return self.flush_entries(table, Rows::Retained(kept)).map(Some);
            }
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
enum Rows<'a> {
    /// Read back from the WAL.
    Stored(&'a [StoredEntry]),
    /// Kept in memory since the commit: (sequence, batch).
    Retained(Kept<'a>),
}

impl Rows<'_> {
    fn first_seq(&self) -> Option<u64> {
        match self {
            Rows::Stored(e) => e.first().map(|e| e.seq),
            Rows::Retained(k) => k.batches.first().map(|b| b.0),
        }
    }

    fn last_seq(&self) -> Option<u64> {
        match self {
            Rows::Stored(e) => e.last().map(|e| e.seq),
            Rows::Retained(k) => k.batches.last().map(|b| b.0),
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
                            Ok(last) => scheduler.release(&table, last, None),
                            Err(e) => {
                                tracing::error!(table, error = %e, "flush failed; will retry");
                                let label = flusher.metrics.table_label(&table);
                                flusher
                                    .metrics
                                    .flush_failures
                                    .with_label_values(&[&label])
                                    .inc();
                                if matches!(e, FlushError::Insert { .. }) {
                                    flusher
                                        .metrics
                                        .chdb_errors
                                        .with_label_values(&["insert"])
                                        .inc();
                                }
                                scheduler.release(&table, None, Some(e.to_string()));
                            }
                        }
                    }
                })
                .ok()
        })
        .collect()
}
