//! Columnar msgpack bodies (`Content-Type: application/msgpack`) →
//! [`MeasurementBatch`]es.
//!
//! # Format
//!
//! The body is a msgpack array of objects, a single object, or several
//! top-level values concatenated (each an object or an array of objects).
//! An object is a map:
//!
//! ```text
//! {
//!   "measurement": str,                  // required, non-empty
//!   "tags":        {str: str|nil},       // optional; nil values are omitted
//!   "timestamps":  [int, ...],           // required, in the request precision
//!   "fields":      {name: [value, ...]}, // required, non-empty
//! }
//! ```
//!
//! Every field array has one value per timestamp; a value is a float, an
//! integer, a string, a boolean, or nil (no value: null). Unknown keys are
//! ignored so producers can add metadata. An object is one series: rows
//! are `(timestamps[i], fields[*][i])`, each needing at least one non-nil
//! field value.
//!
//! # Types
//!
//! msgpack has no separate unsigned type: encoders pick the smallest
//! marker, so `5` may arrive as a positive fixint, `uint8` or `int64`. The
//! rule, per field array, is:
//!
//! * integers go to an **Integer** column, unless the column already exists
//!   (earlier in the body, or in the stored schema) as **UInteger**, in
//!   which case they go there (all must be ≥ 0); a new column becomes
//!   UInteger only if a value exceeds `i64::MAX`;
//! * an array containing any float is a **Float** array, and integers are
//!   widened to float in it; integers also widen into an existing Float
//!   column (JavaScript encoders write `1.0` as the integer `1`);
//! * floats never go into integer columns, and strings and booleans must
//!   match exactly; anything else is a `FieldTypeConflict`.
//!
//! NaN and ±Inf are rejected as in line protocol.
//!
//! # Errors
//!
//! Each object is all-or-nothing; errors carry the 1-based object index in
//! `LineError::line` with `origin == Origin::Object`. Bytes that are not
//! msgpack at all end decoding (the position of later objects is unknown)
//! after recording an error for the object at which it happened.

mod reader;

use crate::batch::{ColumnValues, FieldColumn, FieldType, MeasurementBatch, SeriesDef};
use crate::body::{
    CellBudget, ErrorLog, ParseOptions, ParsedBody, SchemaLookup, MAX_TIME_NS, MIN_TIME_NS,
};
use crate::fasthash::{BytesMap, IdSet, RawKey};
use crate::line_error::{LineError, LineErrorKind};
use crate::series;
use reader::{Item, Malformed, Reader};

/// Decodes a columnar msgpack body. Never fails as a whole: bad objects are
/// reported in [`ParsedBody::errors`] and skipped.
pub fn decode(body: &[u8], opts: &ParseOptions, schema: &dyn SchemaLookup) -> ParsedBody {
    let mut d = Decoder {
        opts,
        schema,
        batches: Vec::new(),
        by_measurement: BytesMap::default(),
        errors: ErrorLog::default(),
        points: 0,
        objects: 0,
        cells: CellBudget::for_body(body.len()),
        new_series: 0,
    };
    d.run(body);
    let batches = d
        .batches
        .into_iter()
        .filter(|b| !b.out.is_empty())
        .map(|mut b| {
            b.out.pad_columns();
            b.out
        })
        .collect();
    let (errors, rejected, series_limited) = d.errors.into_parts();
    ParsedBody {
        batches,
        errors,
        rejected,
        series_limited,
        points: d.points,
        new_keys: Vec::new(),
    }
}

/// A non-nil scalar of a field array.
#[derive(Debug, Clone, Copy)]
enum Scalar<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    BigUInt(u64),
    Float(f64),
    Str(&'a str),
}

/// An object that passed structural checks.
struct Object<'a> {
    measurement: &'a str,
    /// Sorted by key, no duplicates.
    tags: Vec<(&'a str, &'a str)>,
    times: Vec<i64>,
    fields: Vec<(&'a str, Vec<Scalar<'a>>)>,
}

/// Summary of one field array's values.
#[derive(Default)]
struct Kinds {
    float: bool,
    int: bool,
    big: bool,
    negative: bool,
    string: bool,
    boolean: bool,
}

impl Kinds {
    fn of(values: &[Scalar<'_>]) -> Kinds {
        let mut k = Kinds::default();
        for v in values {
            match v {
                Scalar::Nil => {}
                Scalar::Bool(_) => k.boolean = true,
                Scalar::Int(i) => {
                    k.int = true;
                    k.negative |= *i < 0;
                }
                Scalar::BigUInt(_) => k.big = true,
                Scalar::Float(_) => k.float = true,
                Scalar::Str(_) => k.string = true,
            }
        }
        k
    }

    fn numeric(&self) -> bool {
        self.float || self.int || self.big
    }

    /// The array's own type, `None` if all nil; errors if it mixes types.
    fn natural(&self) -> Result<Option<FieldType>, ()> {
        let categories =
            usize::from(self.numeric()) + usize::from(self.string) + usize::from(self.boolean);
        if categories > 1 || (self.big && self.negative) {
            return Err(());
        }
        Ok(if self.string {
            Some(FieldType::String)
        } else if self.boolean {
            Some(FieldType::Boolean)
        } else if self.float {
            Some(FieldType::Float)
        } else if self.big {
            Some(FieldType::UInteger)
        } else if self.int {
            Some(FieldType::Integer)
        } else {
            None
        })
    }

    /// Column type for these values given an existing column type (see the
    /// module docs), or `None` on conflict.
    fn target(&self, natural: FieldType, existing: Option<FieldType>) -> Option<FieldType> {
        match existing {
            None => Some(natural),
            Some(FieldType::Float) if self.numeric() => Some(FieldType::Float),
            Some(FieldType::Integer) if self.numeric() && !self.float && !self.big => {
                Some(FieldType::Integer)
            }
            Some(FieldType::UInteger) if self.numeric() && !self.float && !self.negative => {
                Some(FieldType::UInteger)
            }
            Some(t) if t == natural => Some(t),
            Some(_) => None,
        }
    }
}

struct Batch<'a> {
    out: MeasurementBatch,
    by_name: BytesMap<'a, usize>,
    series_ids: IdSet,
}

struct Decoder<'o, 's, 'a> {
    opts: &'o ParseOptions,
    schema: &'s dyn SchemaLookup,
    batches: Vec<Batch<'a>>,
    by_measurement: BytesMap<'a, usize>,
    errors: ErrorLog,
    points: usize,
    /// Objects seen so far (the 1-based index of the current one).
    objects: usize,
    cells: CellBudget,
    /// Series defined so far (each batch's `series`, summed).
    new_series: usize,
}

impl<'a> Decoder<'_, '_, 'a> {
    fn run(&mut self, body: &'a [u8]) {
        let mut r = Reader::new(body);
        while !r.at_end() {
            let mut after_header = r.clone();
            let header = match after_header.next() {
                Ok(h) => h,
                Err(e) => {
                    // The undecodable bytes are where the next object is.
                    self.objects += 1;
                    return self.malformed(e);
                }
            };
            match header {
                Item::Array(n) => {
                    r = after_header;
                    for _ in 0..n {
                        if !self.object(&mut r, body) {
                            return;
                        }
                    }
                }
                Item::Map(_) => {
                    if !self.object(&mut r, body) {
                        return;
                    }
                }
                other => {
                    self.objects += 1;
                    let kind = LineErrorKind::WrongType {
                        what: format!("top-level value (got {})", other.kind()),
                        expected: "a map or an array of maps",
                    };
                    self.error(kind, "");
                    r = after_header;
                    if let Err(e) = r.skip_rest(header) {
                        return self.malformed(e);
                    }
                }
            }
        }
    }

    /// Decodes the object at the reader; false if decoding must stop.
    fn object(&mut self, r: &mut Reader<'a>, body: &'a [u8]) -> bool {
        self.objects += 1;
        let start = r.pos();
        if let Err(e) = r.skip_value() {
            self.malformed(e);
            return false;
        }
        let bytes = body.get(start..r.pos()).unwrap_or_default();
        match parse_object(bytes, self.opts) {
            Ok(obj) => {
                if let Err(kind) = self.append(obj) {
                    let m = measurement_hint(bytes);
                    self.error(kind, &m);
                }
            }
            Err(kind) => {
                let m = measurement_hint(bytes);
                self.error(kind, &m);
            }
        }
        true
    }

    /// Records that the current object is not msgpack (decoding stops).
    fn malformed(&mut self, e: Malformed) {
        let objects = self.objects;
        let kind = LineErrorKind::MalformedMsgpack {
            reason: e.reason().into(),
        };
        self.errors
            .push(kind, |kind| LineError::for_object(objects, kind, ""));
    }

    fn error(&mut self, kind: LineErrorKind, measurement: &str) {
        let objects = self.objects;
        self.errors.push(kind, |kind| {
            LineError::for_object(objects, kind, measurement)
        });
    }

    /// Type-checks `obj` against the body so far and the schema, then
    /// appends it. Nothing is appended on error.
    fn append(&mut self, obj: Object<'a>) -> Result<(), LineErrorKind> {
        let existing_batch = self
            .by_measurement
            .get(&RawKey(obj.measurement.as_bytes()))
            .copied();
        // Decide every column type first (all-or-nothing).
        let mut targets = Vec::with_capacity(obj.fields.len());
        for (name, values) in &obj.fields {
            let kinds = Kinds::of(values);
            let natural = kinds.natural().map_err(|()| LineErrorKind::MixedTypes {
                field: (*name).to_owned(),
            })?;
            let Some(natural) = natural else {
                targets.push(None);
                continue;
            };
            let existing = existing_batch
                .and_then(|b| self.batches[b].out.field_type(name))
                .or_else(|| self.schema.field_type(obj.measurement, name));
            let target = kinds.target(natural, existing).ok_or_else(|| {
                LineErrorKind::FieldTypeConflict {
                    field: (*name).to_owned(),
                    measurement: obj.measurement.to_owned(),
                    existing: existing.unwrap_or(natural),
                    input: natural,
                }
            })?;
            targets.push(Some(target));
        }
        self.check_bounds(&obj, existing_batch)?;
        if let Some(row) = (0..obj.times.len()).find(|&row| {
            obj.fields
                .iter()
                .all(|(_, v)| matches!(v.get(row), None | Some(Scalar::Nil)))
        }) {
            return Err(LineErrorKind::EmptyRow { row });
        }
        for ((name, values), target) in obj.fields.iter().zip(&targets) {
            if *target != Some(FieldType::String) {
                continue;
            }
            let used = match existing_batch.and_then(|b| self.batches[b].out.field(name)) {
                Some(FieldColumn {
                    values: ColumnValues::String(s),
                    ..
                }) => s.data.len(),
                _ => 0,
            };
            let added: usize = values
                .iter()
                .map(|v| match v {
                    Scalar::Str(s) => s.len(),
                    _ => 0,
                })
                .sum();
            if used.saturating_add(added) > u32::MAX as usize {
                return Err(LineErrorKind::ColumnFull);
            }
        }

        // Commit.
        let b = match existing_batch {
            Some(b) => b,
            None => {
                self.batches.push(Batch {
                    out: MeasurementBatch::new(obj.measurement.to_owned()),
                    by_name: BytesMap::default(),
                    series_ids: IdSet::default(),
                });
                let b = self.batches.len() - 1;
                self.by_measurement
                    .insert(RawKey(obj.measurement.as_bytes()), b);
                b
            }
        };
        let batch = &mut self.batches[b];
        let id = series::series_id_by(obj.measurement, &obj.tags, self.opts.cluster_tag.as_deref());
        if batch.series_ids.insert(id) {
            self.new_series += 1;
            batch.out.series.push(SeriesDef {
                id,
                tags: obj
                    .tags
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            });
        }
        let row0 = batch.out.len();
        let rows = obj.times.len();
        let line = u32::try_from(self.objects).unwrap_or(u32::MAX);
        batch.out.time_ns.extend_from_slice(&obj.times);
        batch.out.series_id.extend(std::iter::repeat_n(id, rows));
        batch.out.line.extend(std::iter::repeat_n(line, rows));
        for ((name, values), target) in obj.fields.iter().zip(targets) {
            let Some(ty) = target else { continue };
            let c = match batch.by_name.get(&RawKey(name.as_bytes())) {
                Some(&c) => c,
                None => {
                    batch
                        .out
                        .fields
                        .push(FieldColumn::new((*name).to_owned(), ty));
                    let c = batch.out.fields.len() - 1;
                    batch.by_name.insert(RawKey(name.as_bytes()), c);
                    c
                }
            };
            if let Some(col) = batch.out.fields.get_mut(c) {
                col.pad_to(row0);
                for v in values {
                    push_scalar(col, *v);
                }
            }
        }
        self.points += rows;
        Ok(())
    }
}

impl Decoder<'_, '_, '_> {
    /// The body's bounds (names the tables can hold, measurements, fields per measurement,
    /// new series, values) for appending `obj`.
    fn check_bounds(
        &mut self,
        obj: &Object<'_>,
        existing: Option<usize>,
    ) -> Result<(), LineErrorKind> {
        let batch = existing.map(|b| &self.batches[b]);
        if batch.is_none() {
            crate::lp::check_stored_name("measurement", obj.measurement)?;
            if self.batches.len() >= self.opts.max_measurements {
                return Err(LineErrorKind::TooManyMeasurements {
                    limit: self.opts.max_measurements,
                });
            }
        }
        if obj.tags.len() > self.opts.max_tags {
            return Err(LineErrorKind::TooManyTags {
                count: obj.tags.len(),
                limit: self.opts.max_tags,
            });
        }
        let (rows_before, columns_before) =
            batch.map_or((0, 0), |b| (b.out.len(), b.out.fields.len()));
        let mut new_columns = 0;
        for (name, _) in &obj.fields {
            if batch.is_none_or(|b| !b.by_name.contains_key(&RawKey(name.as_bytes()))) {
                crate::lp::check_stored_name("field", name)?;
                new_columns += 1;
            }
        }
        if columns_before + new_columns > self.opts.max_fields {
            return Err(LineErrorKind::TooManyFields {
                measurement: obj.measurement.to_owned(),
                limit: self.opts.max_fields,
            });
        }
        let id = series::series_id_by(obj.measurement, &obj.tags, self.opts.cluster_tag.as_deref());
        if self.new_series >= self.opts.max_new_series
            && batch.is_none_or(|b| !b.series_ids.contains(&id))
        {
            return Err(LineErrorKind::SeriesLimit {
                limit: self.opts.max_new_series,
            });
        }
        // Every row of the object fills every column of the batch, and every earlier row of
        // the batch gets a null in each new column.
        let cells = obj
            .times
            .len()
            .saturating_mul(columns_before + new_columns)
            .saturating_add(new_columns.saturating_mul(rows_before));
        if !self.cells.charge(cells) {
            return Err(LineErrorKind::TooSparse {
                limit: self.cells.limit(),
            });
        }
        Ok(())
    }
}

/// Appends one value, converting integers as the column type requires
/// (validated beforehand; anything unexpected becomes a null).
fn push_scalar(col: &mut FieldColumn, v: Scalar<'_>) {
    let ok = match (&mut col.values, v) {
        (ColumnValues::Float(c), Scalar::Float(x)) => {
            c.push(x);
            true
        }
        (ColumnValues::Float(c), Scalar::Int(x)) => {
            c.push(x as f64);
            true
        }
        (ColumnValues::Float(c), Scalar::BigUInt(x)) => {
            c.push(x as f64);
            true
        }
        (ColumnValues::Integer(c), Scalar::Int(x)) => {
            c.push(x);
            true
        }
        (ColumnValues::UInteger(c), Scalar::Int(x)) => match u64::try_from(x) {
            Ok(x) => {
                c.push(x);
                true
            }
            Err(_) => false,
        },
        (ColumnValues::UInteger(c), Scalar::BigUInt(x)) => {
            c.push(x);
            true
        }
        (ColumnValues::Boolean(c), Scalar::Bool(x)) => {
            c.push(x);
            true
        }
        (ColumnValues::String(c), Scalar::Str(s)) => c.try_push(s).is_ok(),
        _ => false,
    };
    if ok {
        col.valid.push(true);
    } else {
        col.values.push_default();
        col.valid.push(false);
    }
}

/// Structural decoding and validation of one object's bytes.
fn parse_object<'a>(bytes: &'a [u8], opts: &ParseOptions) -> Result<Object<'a>, LineErrorKind> {
    let mut r = Reader::new(bytes);
    let n = match r.next().map_err(malformed)? {
        Item::Map(n) => n,
        other => {
            return Err(LineErrorKind::WrongType {
                what: format!("object (got {})", other.kind()),
                expected: "a map",
            })
        }
    };
    let mut measurement = None;
    let mut tags = None;
    let mut times = None;
    let mut fields = None;
    for _ in 0..n {
        let key = match r.next().map_err(malformed)? {
            Item::Str(k) => k,
            other => {
                return Err(LineErrorKind::WrongType {
                    what: format!("object key (got {})", other.kind()),
                    expected: "a string",
                })
            }
        };
        let seen = match key {
            b"measurement" => measurement.replace(read_measurement(&mut r)?).is_some(),
            b"tags" => tags.replace(read_tags(&mut r)?).is_some(),
            b"timestamps" => times.replace(read_times(&mut r, opts)?).is_some(),
            b"fields" => fields.replace(read_fields(&mut r)?).is_some(),
            _ => {
                r.skip_value().map_err(malformed)?;
                false
            }
        };
        if seen {
            return Err(LineErrorKind::DuplicateKey {
                key: String::from_utf8_lossy(key).into_owned(),
            });
        }
    }
    let measurement = measurement.ok_or(LineErrorKind::MissingKey { key: "measurement" })?;
    let times = times.ok_or(LineErrorKind::MissingKey { key: "timestamps" })?;
    let fields = fields.ok_or(LineErrorKind::MissingKey { key: "fields" })?;
    let tags = tags.unwrap_or_default();
    if fields.is_empty() {
        return Err(LineErrorKind::MissingFields);
    }
    for (name, values) in &fields {
        if name.is_empty() {
            return Err(LineErrorKind::MissingFieldKey);
        }
        if *name == "time" {
            return Err(LineErrorKind::ReservedFieldKey {
                measurement: measurement.to_owned(),
            });
        }
        if values.len() != times.len() {
            return Err(LineErrorKind::FieldLengthMismatch {
                field: (*name).to_owned(),
                expected: times.len(),
                actual: values.len(),
            });
        }
        if values
            .iter()
            .any(|v| matches!(v, Scalar::Float(f) if !f.is_finite()))
        {
            return Err(LineErrorKind::NonFiniteFloat {
                field: (*name).to_owned(),
            });
        }
    }
    let mut names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(LineErrorKind::DuplicateKey {
            key: w[0].to_owned(),
        });
    }
    if tags.iter().any(|(k, _)| *k == "time") {
        return Err(LineErrorKind::ReservedTagKey {
            measurement: measurement.to_owned(),
        });
    }
    Ok(Object {
        measurement,
        tags,
        times,
        fields,
    })
}

fn malformed(e: Malformed) -> LineErrorKind {
    LineErrorKind::MalformedMsgpack {
        reason: e.reason().into(),
    }
}

fn utf8(b: &[u8]) -> Result<&str, LineErrorKind> {
    std::str::from_utf8(b).map_err(|_| LineErrorKind::InvalidUtf8)
}

fn read_measurement<'a>(r: &mut Reader<'a>) -> Result<&'a str, LineErrorKind> {
    match r.next().map_err(malformed)? {
        Item::Str(b"") => Err(LineErrorKind::MissingMeasurement),
        Item::Str(s) => utf8(s),
        other => Err(LineErrorKind::WrongType {
            what: format!("\"measurement\" (got {})", other.kind()),
            expected: "a string",
        }),
    }
}

/// Tags sorted by key; nil values are dropped, duplicates rejected.
fn read_tags<'a>(r: &mut Reader<'a>) -> Result<Vec<(&'a str, &'a str)>, LineErrorKind> {
    let wrong = |got: &str| LineErrorKind::WrongType {
        what: format!("\"tags\" (got {got})"),
        expected: "a map of strings to strings",
    };
    let n = match r.next().map_err(malformed)? {
        Item::Nil => return Ok(Vec::new()),
        Item::Map(n) => n,
        other => return Err(wrong(other.kind())),
    };
    let mut tags = Vec::with_capacity((n as usize).min(r.max_items()));
    for _ in 0..n {
        let k = match r.next().map_err(malformed)? {
            Item::Str(k) => utf8(k)?,
            other => return Err(wrong(other.kind())),
        };
        let v = match r.next().map_err(malformed)? {
            Item::Str(v) => utf8(v)?,
            Item::Nil => continue,
            other => return Err(wrong(other.kind())),
        };
        if k.is_empty() {
            return Err(LineErrorKind::MissingTagKey);
        }
        if v.is_empty() {
            return Err(LineErrorKind::MissingTagValue);
        }
        tags.push((k, v));
    }
    series::sort_tags(&mut tags);
    if tags.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(LineErrorKind::DuplicateTags);
    }
    Ok(tags)
}

/// Timestamps converted to in-range nanoseconds.
fn read_times(r: &mut Reader<'_>, opts: &ParseOptions) -> Result<Vec<i64>, LineErrorKind> {
    let wrong = |got: &str| LineErrorKind::WrongType {
        what: format!("\"timestamps\" (got {got})"),
        expected: "an array of integers",
    };
    let n = match r.next().map_err(malformed)? {
        Item::Array(n) => n,
        other => return Err(wrong(other.kind())),
    };
    let mut times = Vec::with_capacity((n as usize).min(r.max_items()));
    for _ in 0..n {
        let t = match r.next().map_err(malformed)? {
            Item::Int(t) => t,
            Item::BigUInt(_) => return Err(LineErrorKind::TimestampOutOfRange),
            other => return Err(wrong(other.kind())),
        };
        let ns = opts
            .precision
            .to_ns(t)
            .map_err(|_| LineErrorKind::TimestampOutOfRange)?;
        if !(MIN_TIME_NS..=MAX_TIME_NS).contains(&ns) {
            return Err(LineErrorKind::TimestampOutOfRange);
        }
        times.push(ns);
    }
    Ok(times)
}

type FieldArrays<'a> = Vec<(&'a str, Vec<Scalar<'a>>)>;

fn read_fields<'a>(r: &mut Reader<'a>) -> Result<FieldArrays<'a>, LineErrorKind> {
    let n = match r.next().map_err(malformed)? {
        Item::Map(n) => n,
        other => {
            return Err(LineErrorKind::WrongType {
                what: format!("\"fields\" (got {})", other.kind()),
                expected: "a map of field names to arrays",
            })
        }
    };
    let mut fields = Vec::with_capacity((n as usize).min(r.max_items()));
    for _ in 0..n {
        let name = match r.next().map_err(malformed)? {
            Item::Str(k) => utf8(k)?,
            other => {
                return Err(LineErrorKind::WrongType {
                    what: format!("field name (got {})", other.kind()),
                    expected: "a string",
                })
            }
        };
        let wrong = |got: &str| LineErrorKind::WrongType {
            what: format!("values of field {name:?} (got {got})"),
            expected: "an array of nil, booleans, numbers or strings",
        };
        let len = match r.next().map_err(malformed)? {
            Item::Array(len) => len,
            other => return Err(wrong(other.kind())),
        };
        let mut values = Vec::with_capacity((len as usize).min(r.max_items()));
        for _ in 0..len {
            values.push(match r.next().map_err(malformed)? {
                Item::Nil => Scalar::Nil,
                Item::Bool(b) => Scalar::Bool(b),
                Item::Int(i) => Scalar::Int(i),
                Item::BigUInt(u) => Scalar::BigUInt(u),
                Item::Float(f) => Scalar::Float(f),
                Item::Str(s) => Scalar::Str(utf8(s)?),
                other => return Err(wrong(other.kind())),
            });
        }
        fields.push((name, values));
    }
    Ok(fields)
}

/// Best-effort measurement name of an object for error messages.
fn measurement_hint(bytes: &[u8]) -> String {
    let mut r = Reader::new(bytes);
    let Ok(Item::Map(n)) = r.next() else {
        return String::new();
    };
    for _ in 0..n {
        let Ok(key) = r.next() else {
            break;
        };
        if key == Item::Str(b"measurement") {
            if let Ok(Item::Str(m)) = r.next() {
                return String::from_utf8_lossy(m).into_owned();
            }
            break;
        }
        if r.skip_rest(key).is_err() || r.skip_value().is_err() {
            break;
        }
    }
    String::new()
}

#[cfg(test)]
mod tests;
