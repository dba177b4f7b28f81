//! Inputs and outputs shared by the body decoders ([`crate::lp`],
//! [`crate::msgpack`]).

use crate::batch::{FieldType, MeasurementBatch};
use crate::fasthash::KeyHash;
use crate::line_error::{LineError, LineErrorKind};
use crate::precision::Precision;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Earliest storable time, as in InfluxDB 1.8 (`MinNanoTime`): the two
/// lowest `i64` values are reserved as sentinels.
pub const MIN_TIME_NS: i64 = i64::MIN + 2;
/// Latest storable time, as in InfluxDB 1.8 (`MaxNanoTime`).
pub const MAX_TIME_NS: i64 = i64::MAX - 1;

/// Per-request decoding options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptions {
    /// Unit of the timestamps in the body.
    pub precision: Precision,
    /// Time (ns) of points without a timestamp, normally "now" at the
    /// server. It is truncated to `precision`, as InfluxDB 1.8 does.
    pub default_time_ns: i64,
    /// Distinct fields one measurement may have in a body; a line adding more is rejected.
    pub max_fields: usize,
    /// Distinct measurements a body may hold; a line adding more is rejected.
    pub max_measurements: usize,
    /// Tags a series may have; a line with more is rejected.
    pub max_tags: usize,
    /// Series a body may define that the schema does not know yet; a line adding more is
    /// rejected with [`LineErrorKind::SeriesLimit`]. Each new series costs memory (its tags)
    /// far beyond its bytes in the body.
    pub max_new_series: usize,
    /// The tag whose value gives a series id its top bits (`series.cluster_tag`; see
    /// [`crate::series`]), or none for plain ids.
    pub cluster_tag: Option<std::sync::Arc<str>>,
}

impl ParseOptions {
    /// Options with no limits beyond the body's own size.
    pub fn new(precision: Precision, default_time_ns: i64) -> Self {
        ParseOptions {
            precision,
            default_time_ns,
            max_fields: usize::MAX,
            max_measurements: usize::MAX,
            max_tags: usize::MAX,
            max_new_series: usize::MAX,
            cluster_tag: None,
        }
    }
}

/// Values (rows x fields, the nulls of absent fields included) a body's batches may hold:
/// half a value per byte of body, plus a million. A value takes at least three bytes to
/// write (`a=1`), so real bodies stay far below; what the bound stops is a body of lines
/// that each add a new field, where every row pads every column and memory grows with the
/// square of the line count.
pub(crate) struct CellBudget {
    used: usize,
    limit: usize,
}

impl CellBudget {
    pub(crate) fn for_body(len: usize) -> Self {
        CellBudget {
            used: 0,
            limit: len / 2 + (1 << 20),
        }
    }

    /// Whether `n` more values still fit; counts them if so.
    pub(crate) fn charge(&mut self, n: usize) -> bool {
        match self.used.checked_add(n) {
            Some(u) if u <= self.limit => {
                self.used = u;
                true
            }
            _ => false,
        }
    }

    /// Counts `n` values that must be kept (a row already accepted).
    pub(crate) fn force(&mut self, n: usize) {
        self.used = self.used.saturating_add(n);
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.used >= self.limit
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }
}

/// The field types already stored, so the decoders can reject conflicting
/// values up front instead of failing a whole flush later.
pub trait SchemaLookup {
    /// Stored type of `field` in `measurement`, if the field exists.
    fn field_type(&self, measurement: &str, field: &str) -> Option<FieldType>;

    /// The id of the series whose line-protocol key (measurement and tags exactly as written,
    /// escapes included) is `raw_key`, if the store has already recorded that series.
    ///
    /// Validating, unescaping, sorting and hashing a key the first time a body shows it costs
    /// several times the rest of its line; with this answer the decoder skips all of it and
    /// reports no [`crate::SeriesDef`] for the series. An implementation must therefore answer
    /// only for keys a decoder accepted before (listed in [`ParsedBody::new_keys`]), with the
    /// id it gave then, and only once the series is recorded. `hash` is [`KeyHash::of`]
    /// `raw_key`, which the decoder computed anyway: implementations look keys up by it.
    fn known_series(&self, _raw_key: &[u8], _hash: KeyHash) -> Option<u64> {
        None
    }
}

/// An empty schema: every field is new.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSchema;

impl SchemaLookup for NoSchema {
    fn field_type(&self, _measurement: &str, _field: &str) -> Option<FieldType> {
        None
    }
}

/// measurement -> field -> type.
impl<S1: BuildHasher, S2: BuildHasher> SchemaLookup
    for HashMap<String, HashMap<String, FieldType, S2>, S1>
{
    fn field_type(&self, measurement: &str, field: &str) -> Option<FieldType> {
        self.get(measurement)?.get(field).copied()
    }
}

/// Rejected lines kept with their text per body. A body can hold millions of bad lines; each
/// kept error holds an excerpt of its line, so keeping them all let a small gzip body of bad
/// lines take gigabytes. Clients are shown the first few anyway.
pub const MAX_KEPT_ERRORS: usize = 100;

/// The rejected lines of one body: every one is counted, the first [`MAX_KEPT_ERRORS`] are
/// kept, and so is the first schema error (a type conflict) wherever it comes, because that
/// is the one InfluxDB reports.
#[derive(Debug, Default)]
pub(crate) struct ErrorLog {
    kept: Vec<LineError>,
    total: usize,
    schema_kept: bool,
    series_limited: usize,
}

impl ErrorLog {
    /// Counts a rejected line; `make` builds its error only when it is kept.
    pub(crate) fn push(
        &mut self,
        kind: LineErrorKind,
        make: impl FnOnce(LineErrorKind) -> LineError,
    ) {
        if matches!(kind, LineErrorKind::SeriesLimit { .. }) {
            // Reported as the cardinality limit (422), not as a bad line.
            self.series_limited += 1;
            return;
        }
        self.total += 1;
        let schema = kind.is_schema_error();
        if self.kept.len() < MAX_KEPT_ERRORS || (schema && !self.schema_kept) {
            self.schema_kept |= schema;
            self.kept.push(make(kind));
        }
    }

    /// The kept errors, the count of rejected lines, and the count of lines refused for
    /// defining more new series than allowed.
    pub(crate) fn into_parts(self) -> (Vec<LineError>, usize, usize) {
        (self.kept, self.total, self.series_limited)
    }
}

/// The decoded body: accepted rows grouped by measurement, plus the errors of rejected lines
/// (or msgpack objects). A rejected line contributes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedBody {
    /// One batch per measurement, in order of first appearance; never empty.
    pub batches: Vec<MeasurementBatch>,
    /// Rejected lines/objects in input order: the first [`MAX_KEPT_ERRORS`] and the first
    /// schema error (see [`ParsedBody::rejected`] for how many there were).
    pub errors: Vec<LineError>,
    /// Every rejected line/object, kept in `errors` or not.
    pub rejected: usize,
    /// Lines/objects refused because the body defined more new series than
    /// [`ParseOptions::max_new_series`] (not in `errors` or `rejected`).
    pub series_limited: usize,
    /// Number of accepted points (rows over all batches).
    pub points: usize,
    /// Series keys this decode validated itself (not answered by
    /// [`SchemaLookup::known_series`]), by position in the body: what a caller remembers
    /// so that the next body need not validate them again. Line protocol only.
    pub new_keys: Vec<NewSeriesKey>,
}

/// A series key, `body[start..start + len]`, that resolved to series `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSeriesKey {
    pub start: usize,
    pub len: usize,
    pub id: u64,
    /// [`KeyHash::of`] the key.
    pub hash: KeyHash,
}

impl ParsedBody {
    /// The batch of `measurement`, if any row was accepted for it.
    pub fn batch(&self, measurement: &str) -> Option<&MeasurementBatch> {
        self.batches.iter().find(|b| b.measurement == measurement)
    }
}
