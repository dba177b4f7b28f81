//! InfluxDB line protocol → columnar [`MeasurementBatch`]es.
//!
//! Follows InfluxDB 1.8 (`models/points.go`):
//!
//! ```text
//! measurement[,tag=value...] field=value[,field=value...] [timestamp]
//! ```
//!
//! * measurement escapes `\,` `\ `; tag keys, tag values and field keys
//!   escape `\,` `\=` `\ `; a backslash before anything else is literal
//!   (see [`crate::escape`] for the exact rule);
//! * field values: floats (`1`, `-1.5`, `.5`, `1e-3`), `123i` (integer),
//!   `123u` (unsigned), `t/T/true/True/TRUE` and `f/F/false/False/FALSE`,
//!   and double-quoted strings escaping `\"` and `\\` (which may span
//!   lines, as in 1.8); NaN/Inf are rejected;
//! * optional integer timestamp in the request precision; without one the
//!   point gets [`ParseOptions::default_time_ns`] truncated to the precision;
//! * blank lines and lines starting with `#` are skipped; leading blanks
//!   and a trailing `\r` are tolerated;
//! * empty tag keys/values, duplicate tag keys, keys longer than 65535
//!   bytes, tag or field keys named `time`, and non-UTF-8 names or strings
//!   reject the line (1.8 deals with `time` keys later, at the shard, by
//!   dropping data; rejecting the line reports it instead);
//! * duplicate field keys in a line: the last value wins.
//!
//! Each line is all-or-nothing: values are appended to their columns as
//! they are parsed and, if the line turns out to be invalid, the columns
//! are truncated back (cheaper than staging every value, since errors are
//! rare). Field types are checked against earlier lines of the body and the
//! stored schema; the first type seen for a (measurement, field) wins, and
//! later lines with another type get a `FieldTypeConflict`. Two values of
//! different types for the same key within one line are a conflict too.
//!
//! Speed: per point the parser does one `memchr` for the key, one lookup
//! by the key's 128-bit hash ([`KeyHash`]; skipped when the previous line had
//! the same key), and per field a positional name check; tags are only parsed,
//! unescaped, sorted and hashed the first time a raw key is seen in a body.

mod number;
mod scan;

pub use crate::batch::{
    ColumnValues, FieldColumn, FieldType, MeasurementBatch, SeriesDef, StringColumn,
};
pub use crate::body::{NewSeriesKey, NoSchema, ParseOptions, ParsedBody, SchemaLookup};
pub use crate::line_error::{LineError, LineErrorKind, Origin};

use crate::batch::FieldColumn as Column;
use crate::body::{CellBudget, ErrorLog, MAX_TIME_NS, MIN_TIME_NS};
use crate::escape::{unescape, unescape_into, EscapeSet};
use crate::fasthash::{bytes_eq, BytesMap, IdSet, KeyHash, KeyHashMap, RawKey};
use crate::precision::Precision;
use crate::series;
use number::{parse_bool, scan_number, scan_timestamp, Number, NumberError};

/// Internal error: boxed so the hot `Result`s stay two words wide (a wide
/// error enum made rustc spill and reload them through the stack).
type Fail = Box<LineErrorKind>;

/// Longest series key (measurement + tags, as written) InfluxDB accepts.
pub const MAX_KEY_LEN: usize = 65535;

/// Parses a line-protocol body. Never fails as a whole: bad lines are
/// reported in [`ParsedBody::errors`] and skipped.
pub fn parse(body: &[u8], opts: &ParseOptions, schema: &dyn SchemaLookup) -> ParsedBody {
    Parser::new(body, opts, schema).run()
}

/// Upper bound on rows reserved up front for a batch (the estimate comes
/// from the body size; beyond this, vectors grow by doubling).
const MAX_RESERVED_ROWS: usize = 1 << 20;

/// Columns of a batch that get room for all its expected rows up front.
const RESERVED_COLUMNS: usize = 64;

/// Refuses a measurement or field name the tables cannot hold (see
/// [`crate::names::stored_name_problem`]), so that no line is acknowledged that could never
/// be flushed.
pub(crate) fn check_stored_name(what: &'static str, name: &str) -> Result<(), LineErrorKind> {
    match crate::names::stored_name_problem(name) {
        None => Ok(()),
        Some(reason) => Err(LineErrorKind::InvalidName {
            what,
            name: crate::line_error::excerpt(name.as_bytes()),
            reason,
        }),
    }
}

/// What a line's key resolved to, cached per distinct raw key.
#[derive(Debug, Clone, Copy)]
struct SeriesSlot {
    batch: usize,
    id: u64,
    /// Index into `Parser::pending_series`.
    pending: usize,
}

/// Per-measurement builder state.
struct Batch<'a> {
    out: MeasurementBatch,
    /// Raw (escaped) key of each column in `out.fields`, same order.
    raw_names: Vec<&'a [u8]>,
    by_raw: BytesMap<'a, usize>,
    series_ids: IdSet,
}

/// A field value that passed validation, not yet appended.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Float(f64),
    Integer(i64),
    UInteger(u64),
    Boolean(bool),
    /// Raw string content between the quotes (validated UTF-8, escaped).
    Str(&'a [u8]),
}

impl Value<'_> {
    #[inline]
    fn field_type(&self) -> FieldType {
        match self {
            Value::Float(_) => FieldType::Float,
            Value::Integer(_) => FieldType::Integer,
            Value::UInteger(_) => FieldType::UInteger,
            Value::Boolean(_) => FieldType::Boolean,
            Value::Str(_) => FieldType::String,
        }
    }
}

/// The line being parsed has appended to this batch; what to undo if it
/// fails.
#[derive(Clone, Copy)]
struct Undo {
    batch: usize,
    /// Row the line would occupy (rows before it are complete).
    row: usize,
    /// Columns that existed before the line.
    columns: usize,
}

struct LineOk {
    /// Index of the terminating `\n` (or the body length).
    end: usize,
    slot: SeriesSlot,
    time_ns: i64,
    /// Newlines inside quoted strings (for physical line numbering).
    inner_newlines: usize,
}

struct Parser<'a, 's> {
    body: &'a [u8],
    precision: Precision,
    default_time_ns: i64,
    schema: &'s dyn SchemaLookup,
    measurements: BytesMap<'a, usize>,
    series: KeyHashMap<SeriesSlot>,
    last_key: Option<(&'a [u8], SeriesSlot)>,
    /// Tag sets of resolved keys, moved into their batch on first use.
    pending_series: Vec<Option<SeriesDef>>,
    batches: Vec<Batch<'a>>,
    undo: Option<Undo>,
    errors: ErrorLog,
    points: usize,
    new_keys: Vec<NewSeriesKey>,
    cells: CellBudget,
    max_fields: usize,
    max_measurements: usize,
    max_tags: usize,
    max_new_series: usize,
    /// New series whose first line was accepted.
    committed_new_series: usize,
    cluster_tag: Option<std::sync::Arc<str>>,
}

/// `SeriesSlot::pending` of a series the schema already knows: no definition to hand over.
const NO_PENDING: usize = usize::MAX;

impl<'a, 's> Parser<'a, 's> {
    fn new(body: &'a [u8], opts: &ParseOptions, schema: &'s dyn SchemaLookup) -> Self {
        Parser {
            body,
            precision: opts.precision,
            default_time_ns: opts.precision.truncate_ns(opts.default_time_ns),
            schema,
            measurements: BytesMap::default(),
            series: KeyHashMap::default(),
            last_key: None,
            pending_series: Vec::new(),
            batches: Vec::new(),
            undo: None,
            errors: ErrorLog::default(),
            points: 0,
            new_keys: Vec::new(),
            cells: CellBudget::for_body(body.len()),
            max_fields: opts.max_fields,
            max_measurements: opts.max_measurements,
            max_tags: opts.max_tags,
            max_new_series: opts.max_new_series,
            committed_new_series: 0,
            cluster_tag: opts.cluster_tag.clone(),
        }
    }

    fn run(mut self) -> ParsedBody {
        let body = self.body;
        let mut pos = 0;
        let mut line_no = 1usize;
        while pos < body.len() {
            let start = scan::skip_blanks(body, pos);
            match body.get(start) {
                None => break,
                Some(b'\n') => {
                    pos = start + 1;
                    line_no += 1;
                    continue;
                }
                Some(b'#') => {
                    pos = scan::line_end(body, start) + 1;
                    line_no += 1;
                    continue;
                }
                Some(_) => {}
            }
            let (end, inner_newlines) = match self.parse_line(start) {
                Ok(ok) => {
                    self.commit(&ok, line_no);
                    (ok.end, ok.inner_newlines)
                }
                Err(kind) => {
                    self.rollback();
                    let end = scan::recover_line_end(body, start);
                    let raw = &body[start..end];
                    self.errors
                        .push(*kind, |kind| LineError::for_line(line_no, kind, raw));
                    (end, memchr::memchr_iter(b'\n', raw).count())
                }
            };
            line_no += 1 + inner_newlines;
            pos = end + 1;
        }
        self.finish()
    }

    fn finish(self) -> ParsedBody {
        let batches = self
            .batches
            .into_iter()
            .filter(|b| !b.out.is_empty())
            .map(|mut b| {
                b.out.pad_columns();
                b.out
            })
            .collect();
        let (errors, rejected, series_limited) = self.errors.into_parts();
        ParsedBody {
            batches,
            errors,
            rejected,
            series_limited,
            points: self.points,
            new_keys: self.new_keys,
        }
    }

    fn parse_line(&mut self, start: usize) -> Result<LineOk, Fail> {
        let body = self.body;
        if self.cells.exhausted() {
            return Err(LineErrorKind::TooSparse {
                limit: self.cells.limit(),
            }
            .into());
        }
        if body.get(start) == Some(&b',') {
            return Err(LineErrorKind::MissingMeasurement.into());
        }
        let key_end = scan::key_end(body, start).ok_or(LineErrorKind::MissingFields)?;
        let key = &body[start..key_end];
        if key.len() > MAX_KEY_LEN {
            return Err(LineErrorKind::KeyTooLong { len: key.len() }.into());
        }
        let slot = self.lookup_series(key, start)?;

        let mut p = scan::skip_blanks(body, key_end);
        if matches!(body.get(p), None | Some(b'\n')) {
            return Err(LineErrorKind::MissingFields.into());
        }
        let row = self.batches[slot.batch].out.len();
        self.undo = Some(Undo {
            batch: slot.batch,
            row,
            columns: self.batches[slot.batch].out.fields.len(),
        });
        let mut inner_newlines = 0;
        let mut ordinal = 0;
        loop {
            // Lines of a measurement usually repeat the same fields in the
            // same order: if the bytes at `p` are the known key of the
            // column at this position followed by `=`, scanning would find
            // exactly that key, so skip the scan and the lookup.
            let (column, raw_key, value_start) =
                match self.batches[slot.batch].raw_names.get(ordinal) {
                    Some(&raw)
                        if body.get(p + raw.len()) == Some(&b'=')
                            && bytes_eq(&body[p..p + raw.len()], raw) =>
                    {
                        (Some(ordinal), raw, p + raw.len() + 1)
                    }
                    _ => {
                        let (raw, v) = field_key(body, p)?;
                        (None, raw, v)
                    }
                };
            let (value, after) = field_value(body, raw_key, value_start, &mut inner_newlines)?;
            self.append(slot.batch, row, column, raw_key, value)?;
            ordinal += 1;
            match body.get(after) {
                Some(b',') => p = after + 1,
                Some(b' ' | b'\t' | b'\r' | b'\n') | None => {
                    p = after;
                    break;
                }
                Some(_) => {
                    return Err(LineErrorKind::InvalidField {
                        field: field_name(raw_key),
                    }
                    .into())
                }
            }
        }

        let p = scan::skip_blanks(body, p);
        let (time_ns, end) = match body.get(p) {
            None | Some(b'\n') => (self.default_time_ns, p),
            Some(_) => {
                let (ts, tok_end) = timestamp(body, p, self.precision)?;
                let q = scan::skip_blanks(body, tok_end);
                if !matches!(body.get(q), None | Some(b'\n')) {
                    return Err(LineErrorKind::BadTimestamp.into());
                }
                (ts, q)
            }
        };
        Ok(LineOk {
            end,
            slot,
            time_ns,
            inner_newlines,
        })
    }

    fn lookup_series(&mut self, key: &'a [u8], start: usize) -> Result<SeriesSlot, Fail> {
        if let Some((last, slot)) = self.last_key {
            if bytes_eq(last, key) {
                return self.uncommitted_within_limit(slot);
            }
        }
        let hash = KeyHash::of(key);
        let slot = match self.series.get(&hash) {
            Some(slot) => self.uncommitted_within_limit(*slot)?,
            None => {
                let slot = match self.schema.known_series(key, hash) {
                    Some(id) => self.known_slot(key, id, start)?,
                    None => {
                        let slot = self.resolve_series(key, start)?;
                        self.new_keys.push(NewSeriesKey {
                            start,
                            len: key.len(),
                            id: slot.id,
                            hash,
                        });
                        slot
                    }
                };
                self.series.insert(hash, slot);
                slot
            }
        };
        self.last_key = Some((key, slot));
        Ok(slot)
    }

    /// A series seen before in this body whose earlier lines all failed is still new: it
    /// counts against the limit when this line commits, so the limit is checked again.
    #[inline(always)]
    fn uncommitted_within_limit(&self, slot: SeriesSlot) -> Result<SeriesSlot, Fail> {
        if slot.pending != NO_PENDING
            && self.committed_new_series >= self.max_new_series
            && matches!(self.pending_series.get(slot.pending), Some(Some(_)))
        {
            return Err(LineErrorKind::SeriesLimit {
                limit: self.max_new_series,
            }
            .into());
        }
        Ok(slot)
    }

    /// A key the schema vouches for (it was validated when first accepted): only its
    /// measurement's batch is needed.
    fn known_slot(&mut self, key: &'a [u8], id: u64, start: usize) -> Result<SeriesSlot, Fail> {
        let m_end = scan::find_unescaped(key, b',', 0).unwrap_or(key.len());
        let batch = self.batch_for(&key[..m_end], start)?;
        Ok(SeriesSlot {
            batch,
            id,
            pending: NO_PENDING,
        })
    }

    /// First sight of a raw key in this body: validate and canonicalise.
    fn resolve_series(&mut self, key: &'a [u8], start: usize) -> Result<SeriesSlot, LineErrorKind> {
        let m_end = scan::find_unescaped(key, b',', 0).unwrap_or(key.len());
        let m_raw = &key[..m_end];
        if m_raw.is_empty() {
            return Err(LineErrorKind::MissingMeasurement);
        }
        let raw_tags = split_tags(key, m_end)?;
        if raw_tags.len() > self.max_tags {
            return Err(LineErrorKind::TooManyTags {
                count: raw_tags.len(),
                limit: self.max_tags,
            });
        }
        let batch = self.batch_for(m_raw, start)?;
        let measurement = self.batches[batch].out.measurement.as_str();

        let (id, tags) = if memchr::memchr(b'\\', key).is_none() {
            // Nothing to unescape, and no byte that canonical escaping would
            // touch can occur unescaped in a key: the raw bytes are already
            // canonical text, up to tag order.
            std::str::from_utf8(key).map_err(|_| LineErrorKind::InvalidUtf8)?;
            let mut tags: Vec<(&[u8], &[u8])> = raw_tags;
            let sorted = tags.windows(2).all(|w| w[0].0 < w[1].0);
            let id = if sorted {
                series::id_of_canonical_key(key)
            } else {
                series::sort_tags(&mut tags);
                let mut canon = Vec::with_capacity(key.len());
                canon.extend_from_slice(m_raw);
                for (k, v) in &tags {
                    canon.push(b',');
                    canon.extend_from_slice(k);
                    canon.push(b'=');
                    canon.extend_from_slice(v);
                }
                series::id_of_canonical_key(&canon)
            };
            let tags = tags
                .iter()
                .map(|(k, v)| (lossless_string(k), lossless_string(v)))
                .collect::<Vec<_>>();
            (id, tags)
        } else {
            let mut tags = Vec::with_capacity(raw_tags.len());
            for (k, v) in raw_tags {
                tags.push((tag_string(k)?, tag_string(v)?));
            }
            series::sort_tags(&mut tags);
            let mut canon = Vec::with_capacity(key.len());
            series::write_canonical_key(
                measurement,
                tags.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                &mut canon,
            );
            (series::id_of_canonical_key(&canon), tags)
        };
        let id = series::with_cluster(id, &tags, self.cluster_tag.as_deref());
        if tags.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(LineErrorKind::DuplicateTags);
        }
        if tags.iter().any(|(k, _)| k == "time") {
            return Err(LineErrorKind::ReservedTagKey {
                measurement: measurement.to_owned(),
            });
        }
        // Series count once their line is accepted; the definitions of lines that failed are
        // held too, so they are bounded at twice the limit.
        if self.committed_new_series >= self.max_new_series
            || self.pending_series.len() >= self.max_new_series.saturating_mul(2)
        {
            return Err(LineErrorKind::SeriesLimit {
                limit: self.max_new_series,
            });
        }
        self.pending_series.push(Some(SeriesDef { id, tags }));
        Ok(SeriesSlot {
            batch,
            id,
            pending: self.pending_series.len() - 1,
        })
    }

    /// The batch of raw measurement `m_raw`, created (with capacity for an
    /// estimate of the rows to come) on first sight at body offset `start`.
    fn batch_for(&mut self, m_raw: &'a [u8], start: usize) -> Result<usize, LineErrorKind> {
        if let Some(&i) = self.measurements.get(&RawKey(m_raw)) {
            return Ok(i);
        }
        if self.batches.len() >= self.max_measurements {
            return Err(LineErrorKind::TooManyMeasurements {
                limit: self.max_measurements,
            });
        }
        let name = unescape(m_raw, EscapeSet::Measurement).into_owned();
        let name = String::from_utf8(name).map_err(|_| LineErrorKind::InvalidUtf8)?;
        check_stored_name("measurement", &name)?;
        // Assume the rest of the body is lines like this one, shared with
        // the measurements seen so far; reserving avoids the copies and
        // page faults of repeated doubling.
        let line_len = scan::line_end(self.body, start) - start + 1;
        let rows = ((self.body.len() - start) / line_len).min(MAX_RESERVED_ROWS)
            / (self.batches.len() + 1);
        let mut out = MeasurementBatch::new(name);
        out.time_ns.reserve(rows);
        out.series_id.reserve(rows);
        out.line.reserve(rows);
        self.batches.push(Batch {
            out,
            raw_names: Vec::new(),
            by_raw: BytesMap::default(),
            series_ids: IdSet::default(),
        });
        let i = self.batches.len() - 1;
        self.measurements.insert(RawKey(m_raw), i);
        Ok(i)
    }

    /// Appends a field value of the line at `row` (creating its column if
    /// new), after type checks. `column` is the field's column when the
    /// caller already knows it.
    #[inline]
    fn append(
        &mut self,
        batch: usize,
        row: usize,
        column: Option<usize>,
        raw: &'a [u8],
        value: Value<'a>,
    ) -> Result<(), Fail> {
        let c = match column.or_else(|| self.batches[batch].by_raw.get(&RawKey(raw)).copied()) {
            Some(c) => c,
            None => self.new_column(batch, raw, value.field_type())?,
        };
        let b = &mut self.batches[batch];
        let Some(col) = b.out.fields.get_mut(c) else {
            return Err(LineErrorKind::ColumnFull.into());
        };
        if col.field_type() != value.field_type() {
            return Err(conflict(col, &b.out.measurement, value.field_type()));
        }
        let appended = if col.valid.len() > row {
            // The key already occurred in this line: the last value wins.
            col.pop_last();
            push_value(col, value)
        } else {
            col.pad_to(row);
            push_value(col, value)
        };
        if appended {
            Ok(())
        } else {
            Err(LineErrorKind::ColumnFull.into())
        }
    }

    /// Creates the column of a field first seen on this line (undone with
    /// the line if it fails), after checking it against the stored schema.
    #[cold]
    fn new_column(&mut self, batch: usize, raw: &'a [u8], ty: FieldType) -> Result<usize, Fail> {
        let b = &mut self.batches[batch];
        let name = String::from_utf8(unescape(raw, EscapeSet::Tag).into_owned())
            .map_err(|_| LineErrorKind::InvalidUtf8)?;
        let measurement = &b.out.measurement;
        if name == "time" {
            return Err(LineErrorKind::ReservedFieldKey {
                measurement: measurement.clone(),
            }
            .into());
        }
        check_stored_name("field", &name)?;
        if b.out.fields.len() >= self.max_fields {
            return Err(LineErrorKind::TooManyFields {
                measurement: measurement.clone(),
                limit: self.max_fields,
            }
            .into());
        }
        // The new column holds a value (or null) for every row of its batch.
        if !self.cells.charge(b.out.len() + 1) {
            return Err(LineErrorKind::TooSparse {
                limit: self.cells.limit(),
            }
            .into());
        }
        if let Some(stored) = self.schema.field_type(measurement, &name) {
            if stored != ty {
                return Err(LineErrorKind::FieldTypeConflict {
                    field: name,
                    measurement: measurement.clone(),
                    existing: stored,
                    input: ty,
                }
                .into());
            }
        }
        let mut col = Column::new(name, ty);
        // Room for every row expected, as for the batch's own columns, while columns are few;
        // beyond that a column is one of many sparse ones and grows as needed.
        if b.out.fields.len() < RESERVED_COLUMNS {
            col.reserve(b.out.time_ns.capacity());
        }
        b.out.fields.push(col);
        b.raw_names.push(raw);
        let c = b.out.fields.len() - 1;
        b.by_raw.insert(RawKey(raw), c);
        Ok(c)
    }

    /// Records a fully parsed line's row. Cannot fail.
    fn commit(&mut self, ok: &LineOk, line_no: usize) {
        self.undo = None;
        let b = &mut self.batches[ok.slot.batch];
        // The row's own first value was charged with its column, when that is new.
        self.cells.force(b.out.fields.len());
        b.out.time_ns.push(ok.time_ns);
        b.out.series_id.push(ok.slot.id);
        b.out.line.push(u32::try_from(line_no).unwrap_or(u32::MAX));
        if let Some(def) = self
            .pending_series
            .get_mut(ok.slot.pending)
            .and_then(Option::take)
        {
            if b.series_ids.insert(def.id) {
                b.out.series.push(def);
                self.committed_new_series += 1;
            }
        }
        self.points += 1;
    }

    /// Removes everything a failed line appended.
    #[cold]
    fn rollback(&mut self) {
        let Some(undo) = self.undo.take() else {
            return;
        };
        let Some(b) = self.batches.get_mut(undo.batch) else {
            return;
        };
        for raw in b.raw_names.drain(undo.columns..) {
            b.by_raw.remove(&RawKey(raw));
        }
        b.out.fields.truncate(undo.columns);
        for col in &mut b.out.fields {
            col.truncate(undo.row);
        }
    }
}

/// Scans the value of field `raw_key` starting at `p`; returns it and the
/// position after it.
#[inline(always)]
fn field_value<'a>(
    body: &'a [u8],
    raw_key: &[u8],
    p: usize,
    inner_newlines: &mut usize,
) -> Result<(Value<'a>, usize), Fail> {
    let field = || field_name(raw_key);
    match body.get(p) {
        None | Some(b',' | b' ' | b'\t' | b'\r' | b'\n') => {
            Err(LineErrorKind::MissingFieldValue { field: field() }.into())
        }
        Some(b'"') => {
            let close =
                scan::closing_quote(body, p + 1).ok_or(LineErrorKind::UnterminatedString)?;
            let raw = &body[p + 1..close];
            std::str::from_utf8(raw).map_err(|_| LineErrorKind::InvalidUtf8)?;
            *inner_newlines += memchr::memchr_iter(b'\n', raw).count();
            Ok((Value::Str(raw), close + 1))
        }
        Some(b't' | b'T' | b'f' | b'F') => {
            let end = scan::token_end(body, p);
            let v = parse_bool(&body[p..end])
                .ok_or_else(|| LineErrorKind::InvalidBoolean { field: field() })?;
            Ok((Value::Boolean(v), end))
        }
        Some(_) => match scan_number(body, p) {
            Ok((Number::Float(v), end)) => Ok((Value::Float(v), end)),
            Ok((Number::Integer(v), end)) => Ok((Value::Integer(v), end)),
            Ok((Number::UInteger(v), end)) => Ok((Value::UInteger(v), end)),
            Err(NumberError::Invalid) => Err(LineErrorKind::BadNumber { field: field() }.into()),
            Err(NumberError::OutOfRange) => {
                Err(LineErrorKind::IntegerOutOfRange { field: field() }.into())
            }
            Err(NumberError::NonFinite) => {
                Err(LineErrorKind::NonFiniteFloat { field: field() }.into())
            }
        },
    }
}

#[cold]
fn conflict(col: &Column, measurement: &str, input: FieldType) -> Fail {
    LineErrorKind::FieldTypeConflict {
        field: col.name.clone(),
        measurement: measurement.to_owned(),
        existing: col.field_type(),
        input,
    }
    .into()
}

/// Appends `value` to `col`; false (and nothing appended) if a string
/// column is full or, which cannot happen after the type check, the types
/// differ.
#[inline(always)]
fn push_value(col: &mut Column, value: Value<'_>) -> bool {
    let ok = match (&mut col.values, value) {
        (ColumnValues::Float(v), Value::Float(x)) => {
            v.push(x);
            true
        }
        (ColumnValues::Integer(v), Value::Integer(x)) => {
            v.push(x);
            true
        }
        (ColumnValues::UInteger(v), Value::UInteger(x)) => {
            v.push(x);
            true
        }
        (ColumnValues::Boolean(v), Value::Boolean(x)) => {
            v.push(x);
            true
        }
        (ColumnValues::String(v), Value::Str(raw)) => v
            .push_bytes_with(raw.len(), |d| unescape_into(raw, EscapeSet::StringField, d))
            .is_ok(),
        _ => false,
    };
    if ok {
        col.valid.push(true);
    }
    ok
}

/// Splits the tag section `key[m_end..]` (which starts with `,` unless
/// empty) into raw (key, value) pairs, checking their shape.
/// Raw (escaped) tag (key, value) pairs borrowed from a line.
type RawTags<'k> = Vec<(&'k [u8], &'k [u8])>;

fn split_tags(key: &[u8], m_end: usize) -> Result<RawTags<'_>, LineErrorKind> {
    let mut tags = Vec::new();
    let mut i = m_end;
    while i < key.len() {
        let seg_start = i + 1;
        let seg_end = scan::find_unescaped(key, b',', seg_start).unwrap_or(key.len());
        let seg = &key[seg_start..seg_end];
        let eq = match scan::find_unescaped(seg, b'=', 0) {
            Some(eq) => eq,
            None if seg.is_empty() => return Err(LineErrorKind::MissingTagKey),
            None => return Err(LineErrorKind::MissingTagValue),
        };
        let (k, v) = (&seg[..eq], &seg[eq + 1..]);
        if k.is_empty() {
            return Err(LineErrorKind::MissingTagKey);
        }
        if v.is_empty() {
            return Err(LineErrorKind::MissingTagValue);
        }
        if scan::find_unescaped(v, b'=', 0).is_some() {
            return Err(LineErrorKind::InvalidTagFormat);
        }
        tags.push((k, v));
        i = seg_end;
    }
    Ok(tags)
}

/// Scans a field key at `p`; returns it (raw) and the position after `=`.
fn field_key(body: &[u8], p: usize) -> Result<(&[u8], usize), LineErrorKind> {
    let mut i = p;
    loop {
        match body.get(i) {
            Some(b'=') if i == p => return Err(LineErrorKind::MissingFieldKey),
            Some(b'=') => return Ok((&body[p..i], i + 1)),
            Some(b'\\') if !matches!(body.get(i + 1), Some(b'\n') | None) => i += 2,
            Some(b'\\' | b',' | b' ' | b'\n') | None if i == p => {
                return Err(LineErrorKind::MissingFieldKey)
            }
            Some(b'\\' | b',' | b' ' | b'\n') | None => {
                return Err(LineErrorKind::InvalidField {
                    field: field_name(&body[p..i]),
                })
            }
            Some(_) => i += 1,
        }
    }
}

/// Parses the timestamp at `body[p]` and converts it to an in-range
/// nanosecond time; returns it and the position after it.
#[inline]
fn timestamp(body: &[u8], p: usize, precision: Precision) -> Result<(i64, usize), Fail> {
    let (v, end) = scan_timestamp(body, p).map_err(|e| match e {
        NumberError::OutOfRange => LineErrorKind::TimestampOutOfRange,
        _ => LineErrorKind::BadTimestamp,
    })?;
    let ns = precision
        .to_ns(v)
        .map_err(|_| LineErrorKind::TimestampOutOfRange)?;
    if (MIN_TIME_NS..=MAX_TIME_NS).contains(&ns) {
        Ok((ns, end))
    } else {
        Err(LineErrorKind::TimestampOutOfRange.into())
    }
}

/// A raw field key for error messages.
#[cold]
fn field_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(&unescape(raw, EscapeSet::Tag)).into_owned()
}

fn tag_string(raw: &[u8]) -> Result<String, LineErrorKind> {
    String::from_utf8(unescape(raw, EscapeSet::Tag).into_owned())
        .map_err(|_| LineErrorKind::InvalidUtf8)
}

/// For bytes already validated as UTF-8.
fn lossless_string(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

#[cfg(test)]
mod tests;
