//! One write request, from a decompressed body to durable WAL entries.
//!
//! `prepare` is synchronous and CPU-bound (parse, validate against the catalog, claim series,
//! encode) and runs on a blocking thread; `commit` hands the entries to the WAL committer and
//! waits for the group commit. Lines that fail are dropped one by one, as InfluxDB does, and the
//! rest are written.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use sluice_core::names::{file_name_len, table_name, MAX_MEASUREMENT_LEN, MAX_TABLE_FILE_NAME_LEN};
use sluice_core::precision::Precision;
use sluice_core::{lp, msgpack, FieldType, KeyHash, MeasurementBatch, ParseOptions, ParsedBody};

use crate::catalog::{Catalog, CatalogError, Target, SERIES_TABLE};
use crate::metrics::Metrics;
use crate::payload::{self, SeriesRow};
use crate::wal::{Entry, Wal, WalError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    LineProtocol,
    Msgpack,
}

/// Why a whole request failed (no point of it was written).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("{0}")]
    Wal(#[from] WalError),
    #[error("write-ahead log commit failed: {0}")]
    Commit(Arc<WalError>),
}

/// A line (or msgpack object) that was dropped, with the message the client sees.
#[derive(Debug, Clone)]
pub struct Rejection {
    pub line: usize,
    pub message: String,
}

/// Messages of dropped lines kept per request: the client is shown a few, and a body of
/// millions of bad lines must not hold millions of messages.
const MAX_KEPT_REJECTIONS: usize = 100;

/// The lines a request dropped: every one counted, the earliest [`MAX_KEPT_REJECTIONS`] kept
/// with their message, and the earliest line refused for a reason other than its syntax
/// (InfluxDB reports that one alone).
#[derive(Debug, Default)]
pub struct Rejections {
    kept: Vec<Rejection>,
    total: usize,
    first_rejected: Option<Rejection>,
}

impl Rejections {
    /// Records a dropped line; `parse` says whether it failed to parse (rather than being
    /// refused by the schema or a limit).
    pub fn push(&mut self, line: usize, parse: bool, message: impl FnOnce() -> String) {
        self.total += 1;
        let earlier = |r: &Option<Rejection>| r.as_ref().is_none_or(|f| line < f.line);
        let keep = self.kept.len() < 2 * MAX_KEPT_REJECTIONS;
        if !parse && earlier(&self.first_rejected) {
            let r = Rejection {
                line,
                message: message(),
            };
            if keep {
                self.kept.push(r.clone());
            }
            self.first_rejected = Some(r);
        } else if keep {
            self.kept.push(Rejection {
                line,
                message: message(),
            });
        }
        if self.kept.len() == 2 * MAX_KEPT_REJECTIONS {
            self.trim();
        }
    }

    /// Counts dropped lines whose messages were not kept.
    fn count_unlisted(&mut self, n: usize) {
        self.total += n;
    }

    fn trim(&mut self) {
        self.kept.sort_by_key(|r| r.line);
        self.kept.truncate(MAX_KEPT_REJECTIONS);
    }

    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// A request ready to commit.
pub struct Prepared {
    pub entries: Vec<Entry>,
    pub points: usize,
    /// Field values of those points (nulls left out): the payload's shape, for the metrics.
    pub field_values: usize,
    pub rejections: Rejections,
    /// Points dropped because their series would exceed the cardinality limit.
    pub over_limit: usize,
    /// Of those, the points dropped by the per-request limit on new series.
    pub request_series_limited: usize,
    /// Series claimed for `target`'s database, given back if the write fails.
    claimed: Vec<u64>,
    /// Raw keys of the series this write claims, remembered once it is durable.
    claimed_keys: Vec<(KeyHash, u64)>,
    target: Target,
}

/// What the client is told after a commit.
#[derive(Debug)]
pub struct Outcome {
    pub points: usize,
    pub dropped: usize,
    /// Messages of the earliest dropped lines, in line order.
    pub errors: Vec<String>,
    /// The earliest line refused for a reason other than its syntax, if any.
    pub first_rejected: Option<String>,
    pub over_limit: usize,
    /// Of `over_limit`, the points over `limits.max_new_series_per_request`.
    pub request_series_limited: usize,
    pub parse_only: bool,
}

/// Field names that collide with the table's own columns.
const RESERVED_FIELDS: [&str; 3] = ["time", "series_id", crate::catalog::SEQ_COLUMN];

pub struct Ingest {
    pub catalog: Arc<Catalog>,
    pub wal: Arc<Wal>,
    pub metrics: Arc<Metrics>,
    pub limits: sluice_core::config::LimitsConfig,
    /// `series.cluster_tag`, shared by every request's parse options.
    pub cluster_tag: Option<Arc<str>>,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Ingest {
    /// Parses and validates `body` for `target`, applies schema changes, claims new series and
    /// encodes the WAL entries.
    pub fn prepare(
        &self,
        target: &Target,
        precision: Precision,
        format: BodyFormat,
        body: &[u8],
    ) -> Result<Prepared, WriteError> {
        let started = Instant::now();
        let now = now_ns();
        let opts = ParseOptions {
            precision,
            // InfluxDB stamps points without a timestamp with the server's time, truncated to the
            // request precision.
            default_time_ns: now - now.rem_euclid(precision.multiplier_ns()),
            max_fields: self.limits.max_fields_per_measurement as usize,
            max_measurements: self.limits.max_measurements_per_database as usize,
            max_tags: self.limits.max_tags_per_series as usize,
            max_new_series: self.limits.max_new_series_per_request as usize,
            cluster_tag: self.cluster_tag.clone(),
        };
        let lookup = self.catalog.lookup(target);
        let ParsedBody {
            batches,
            errors,
            rejected,
            series_limited,
            new_keys,
            ..
        } = match format {
            BodyFormat::LineProtocol => lp::parse(body, &opts, &lookup),
            BodyFormat::Msgpack => msgpack::decode(body, &opts, &lookup),
        };
        self.metrics
            .observe_stage("parse", started.elapsed().as_secs_f64());
        let mut rejections = Rejections::default();
        for e in &errors {
            rejections.push(e.line, !e.kind.is_schema_error(), || e.to_string());
        }
        rejections.count_unlisted(rejected - errors.len());

        let series_started = Instant::now();
        let mut entries = Vec::with_capacity(batches.len() + 1);
        let mut series_rows = Vec::new();
        let mut claimed_all = Vec::new();
        let mut points = 0usize;
        let mut field_values = 0usize;
        let mut over_limit = series_limited;
        for mut batch in batches {
            let table = table_name(&target.db, &target.rp, &batch.measurement);
            if batch.measurement.len() > MAX_MEASUREMENT_LEN
                || file_name_len(&table) > MAX_TABLE_FILE_NAME_LEN
            {
                let message = format!(
                    "measurement name too long: {:?} must be at most {MAX_MEASUREMENT_LEN} bytes, and its table name at most {MAX_TABLE_FILE_NAME_LEN} bytes as a file name (characters other than letters, digits and '_' count 3 bytes)",
                    truncate(&batch.measurement, 64)
                );
                for &line in &batch.line {
                    rejections.push(line as usize, false, || format!("{message} (line {line})"));
                }
                continue;
            }
            drop_reserved_fields(&mut batch, &mut rejections);
            let fields: Vec<_> = batch
                .fields
                .iter()
                .map(|c| (c.name.clone(), c.field_type()))
                .collect();
            let check = match self.catalog.ensure_table(target, &table, &fields) {
                Ok(check) => check,
                Err(e @ CatalogError::TooManyMeasurements { .. }) => {
                    let message = e.to_string();
                    for &line in &batch.line {
                        rejections
                            .push(line as usize, false, || format!("{message} (line {line})"));
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for (field, existing) in check.conflicts {
                drop_conflicting(&mut batch, &field, existing, &mut rejections);
            }
            for field in check.over_field_limit {
                drop_over_field_limit(
                    &mut batch,
                    &field,
                    self.limits.max_fields_per_measurement,
                    &mut rejections,
                );
            }
            // Series: claim the new ones within the cardinality limit.
            let ids: Vec<u64> = batch.series.iter().map(|s| s.id).collect();
            let (claimed, refused) =
                self.catalog
                    .claim_series(&target.db, &ids, self.limits.max_series);
            if !refused.is_empty() {
                let keep: Vec<bool> = batch
                    .series_id
                    .iter()
                    .map(|id| !refused.contains(id))
                    .collect();
                over_limit += keep.iter().filter(|k| !**k).count();
                batch.retain_rows(&keep);
            }
            if !claimed.is_empty() {
                let claimed_set: HashSet<u64> = claimed.iter().copied().collect();
                for s in batch.series.iter().filter(|s| claimed_set.contains(&s.id)) {
                    series_rows.push(SeriesRow {
                        db: target.db.clone(),
                        measurement: batch.measurement.clone(),
                        series_id: s.id,
                        tags: s.tags.clone(),
                        first_seen_ns: now,
                    });
                }
                claimed_all.extend(claimed);
            }
            if batch.is_empty() {
                continue;
            }
            points += batch.len();
            field_values += batch
                .fields
                .iter()
                .map(|c| c.len() - c.null_count())
                .sum::<usize>();
            let payload = payload::encode_measurement(&batch);
            // Line numbers only answer this request; the flush does not need them.
            batch.line = Vec::new();
            entries.push(Entry {
                table,
                rows: batch.len() as u32,
                payload,
                batch: Some(Arc::new(batch)),
            });
        }
        if !series_rows.is_empty() {
            entries.push(Entry {
                table: SERIES_TABLE.to_string(),
                rows: series_rows.len() as u32,
                payload: payload::encode_series(&series_rows),
                batch: None,
            });
        }
        // Keys the parser had to resolve: those of series recorded before this write can be
        // remembered now; those this write claims, only once it is durable.
        let mut claimed_keys = Vec::new();
        if !new_keys.is_empty() {
            let claimed_set: HashSet<u64> = claimed_all.iter().copied().collect();
            let mut known_keys = Vec::with_capacity(new_keys.len());
            for k in &new_keys {
                if claimed_set.contains(&k.id) {
                    claimed_keys.push((k.hash, k.id));
                } else {
                    known_keys.push((k.hash, k.id));
                }
            }
            self.catalog.remember_series_keys(target, &known_keys);
        }
        self.metrics
            .observe_stage("series", series_started.elapsed().as_secs_f64());
        rejections.trim();
        Ok(Prepared {
            entries,
            points,
            field_values,
            rejections,
            over_limit,
            request_series_limited: series_limited,
            claimed: claimed_all,
            claimed_keys,
            target: target.clone(),
        })
    }

    /// Makes the prepared entries durable. Nothing is acknowledged before this returns `Ok`.
    pub async fn commit(&self, prepared: Prepared) -> Result<Outcome, WriteError> {
        let Prepared {
            entries,
            points,
            field_values: _,
            rejections,
            over_limit,
            request_series_limited,
            claimed,
            claimed_keys,
            target,
        } = prepared;
        let db = &target.db;
        if !entries.is_empty() {
            let started = Instant::now();
            let rx = match self.wal.submit(entries) {
                Ok(rx) => rx,
                Err(e) => {
                    self.catalog.release_series(db, &claimed);
                    return Err(e.into());
                }
            };
            let result = rx.await.map_err(|_| WalError::Closed);
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    self.catalog.release_series(db, &claimed);
                    return Err(WriteError::Commit(e));
                }
                Err(e) => {
                    self.catalog.release_series(db, &claimed);
                    return Err(e.into());
                }
            }
            self.metrics
                .observe_stage("wal_commit", started.elapsed().as_secs_f64());
            self.catalog.remember_series_keys(&target, &claimed_keys);
        }
        let parse_only = !rejections.is_empty() && rejections.first_rejected.is_none();
        Ok(Outcome {
            points,
            dropped: rejections.len() + over_limit,
            errors: rejections.kept.into_iter().map(|r| r.message).collect(),
            first_rejected: rejections.first_rejected.map(|r| r.message),
            over_limit,
            request_series_limited,
            parse_only,
        })
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Drops rows where `keep` is false, recording `message` for each dropped row's line.
fn drop_rows(
    batch: &mut MeasurementBatch,
    keep: Vec<bool>,
    message: impl Fn() -> String,
    rejections: &mut Rejections,
) {
    if keep.iter().all(|k| *k) {
        return;
    }
    let msg = message();
    for (i, k) in keep.iter().enumerate() {
        if !k {
            let line = batch.line[i];
            rejections.push(line as usize, false, || format!("{msg} (line {line})"));
        }
    }
    batch.retain_rows(&keep);
}

/// InfluxDB refuses a field named `time`; sluice also refuses its own columns, `series_id` and
/// `_sluice_seq`.
fn drop_reserved_fields(batch: &mut MeasurementBatch, rejections: &mut Rejections) {
    for reserved in RESERVED_FIELDS {
        let Some(idx) = batch.fields.iter().position(|c| c.name == reserved) else {
            continue;
        };
        let keep: Vec<bool> = batch.fields[idx].valid.iter().map(|v| !v).collect();
        let m = batch.measurement.clone();
        drop_rows(
            batch,
            keep,
            || {
                format!("invalid field name: input field \"{reserved}\" on measurement \"{m}\" is invalid")
            },
            rejections,
        );
        if let Some(idx) = batch.fields.iter().position(|c| c.name == reserved) {
            batch.fields.remove(idx);
        }
    }
}

/// `field` would take the table past `max_fields_per_measurement`: drop the rows that set it.
fn drop_over_field_limit(
    batch: &mut MeasurementBatch,
    field: &str,
    limit: u32,
    rejections: &mut Rejections,
) {
    let Some(idx) = batch.fields.iter().position(|c| c.name == field) else {
        return;
    };
    let keep: Vec<bool> = batch.fields[idx].valid.iter().map(|v| !v).collect();
    let m = batch.measurement.clone();
    drop_rows(
        batch,
        keep,
        || {
            format!("max-fields limit exceeded: input field {field:?} on measurement {m:?} would make more than {limit} fields")
        },
        rejections,
    );
    if let Some(idx) = batch.fields.iter().position(|c| c.name == field) {
        batch.fields.remove(idx);
    }
}

/// Another request fixed `field`'s type first: drop this request's rows that set it.
fn drop_conflicting(
    batch: &mut MeasurementBatch,
    field: &str,
    existing: FieldType,
    rejections: &mut Rejections,
) {
    let Some(idx) = batch.fields.iter().position(|c| c.name == field) else {
        return;
    };
    let input = batch.fields[idx].field_type();
    let keep: Vec<bool> = batch.fields[idx].valid.iter().map(|v| !v).collect();
    let m = batch.measurement.clone();
    drop_rows(
        batch,
        keep,
        || {
            format!(
                "field type conflict: input field \"{field}\" on measurement \"{m}\" is type {}, already exists as type {}",
                input.name(),
                existing.name()
            )
        },
        rejections,
    );
    if let Some(idx) = batch.fields.iter().position(|c| c.name == field) {
        batch.fields.remove(idx);
    }
}
