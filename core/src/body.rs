//! Inputs and outputs shared by the body decoders ([`crate::lp`],
//! [`crate::msgpack`]).

use crate::batch::{FieldType, MeasurementBatch};
use crate::fasthash::KeyHash;
use crate::line_error::LineError;
use crate::precision::Precision;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Earliest storable time, as in InfluxDB 1.8 (`MinNanoTime`): the two
/// lowest `i64` values are reserved as sentinels.
pub const MIN_TIME_NS: i64 = i64::MIN + 2;
/// Latest storable time, as in InfluxDB 1.8 (`MaxNanoTime`).
pub const MAX_TIME_NS: i64 = i64::MAX - 1;

/// Per-request decoding options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Unit of the timestamps in the body.
    pub precision: Precision,
    /// Time (ns) of points without a timestamp, normally "now" at the
    /// server. It is truncated to `precision`, as InfluxDB 1.8 does.
    pub default_time_ns: i64,
}

impl ParseOptions {
    pub fn new(precision: Precision, default_time_ns: i64) -> Self {
        ParseOptions {
            precision,
            default_time_ns,
        }
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

/// The decoded body: accepted rows grouped by measurement, plus one error
/// per rejected line (or msgpack object). A rejected line contributes
/// nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedBody {
    /// One batch per measurement, in order of first appearance; never empty.
    pub batches: Vec<MeasurementBatch>,
    /// Rejected lines/objects in input order.
    pub errors: Vec<LineError>,
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
