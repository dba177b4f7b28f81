//! Columnar write batches: the parsed form of a request body, one batch per
//! measurement, ready to be logged (see [`crate::codec`]) and turned into
//! Arrow/ClickHouse columns without per-row work.

use std::collections::HashSet;
use std::fmt;

/// Type of a field column. InfluxDB never converts between these: a value of
/// another type for an existing field is a type conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    Float,
    Integer,
    UInteger,
    String,
    Boolean,
}

impl FieldType {
    /// The InfluxDB name used in error messages and `SHOW FIELD KEYS`.
    pub const fn name(self) -> &'static str {
        match self {
            FieldType::Float => "float",
            FieldType::Integer => "integer",
            FieldType::UInteger => "unsigned",
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Variable-length UTF-8 strings in Arrow layout: value `i` is
/// `data[offsets[i]..offsets[i + 1]]`; `offsets` has `len() + 1` entries.
///
/// `u32` offsets (Arrow `Utf8`, not `LargeUtf8`) cap a column at 4 GiB,
/// far above any request body we accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringColumn {
    pub offsets: Vec<u32>,
    pub data: Vec<u8>,
}

/// A string column would exceed the 4 GiB addressable by `u32` offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("string column exceeds 4 GiB")]
pub struct StringColumnFull;

impl Default for StringColumn {
    fn default() -> Self {
        StringColumn::new()
    }
}

impl StringColumn {
    pub fn new() -> Self {
        StringColumn {
            offsets: vec![0],
            data: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, or `None` when out of range or the offsets are corrupt.
    pub fn get(&self, i: usize) -> Option<&str> {
        let start = *self.offsets.get(i)? as usize;
        let end = *self.offsets.get(i + 1)? as usize;
        std::str::from_utf8(self.data.get(start..end)?).ok()
    }

    /// Appends a value.
    pub fn try_push(&mut self, s: &str) -> Result<(), StringColumnFull> {
        self.push_bytes_with(s.len(), |data| data.extend_from_slice(s.as_bytes()))
    }

    /// Whether `extra` more bytes still fit under the `u32` offset limit.
    pub(crate) fn has_room(&self, extra: usize) -> bool {
        self.data
            .len()
            .checked_add(extra)
            .is_some_and(|n| n <= u32::MAX as usize)
    }

    /// Appends a value produced by `write`, which may append at most
    /// `max_len` bytes of valid UTF-8 (callers check this, e.g. unescaping
    /// a validated string never grows it).
    pub(crate) fn push_bytes_with(
        &mut self,
        max_len: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), StringColumnFull> {
        if !self.has_room(max_len) {
            return Err(StringColumnFull);
        }
        write(&mut self.data);
        let end = u32::try_from(self.data.len()).map_err(|_| StringColumnFull)?;
        self.offsets.push(end);
        Ok(())
    }

    /// Shortens to `rows` values (no-op if already shorter).
    pub(crate) fn truncate(&mut self, rows: usize) {
        if rows < self.len() {
            self.offsets.truncate(rows + 1);
            let end = self.offsets.last().map_or(0, |&e| e as usize);
            self.data.truncate(end);
        }
    }

    fn push_empty(&mut self) {
        let end = self.offsets.last().copied().unwrap_or(0);
        self.offsets.push(end);
    }

    fn retain(&mut self, keep: &[bool]) {
        let mut offsets = Vec::with_capacity(self.offsets.len());
        let mut data = Vec::with_capacity(self.data.len());
        offsets.push(0);
        for i in 0..self.len() {
            if keep_row(keep, i) {
                let (s, e) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
                data.extend_from_slice(self.data.get(s..e).unwrap_or_default());
                // Never more than before, so it fits.
                offsets.push(data.len() as u32);
            }
        }
        self.offsets = offsets;
        self.data = data;
    }
}

/// The values of one field column; nulls hold the type's default.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    Float(Vec<f64>),
    Integer(Vec<i64>),
    UInteger(Vec<u64>),
    String(StringColumn),
    Boolean(Vec<bool>),
}

impl ColumnValues {
    pub fn new(ty: FieldType) -> Self {
        match ty {
            FieldType::Float => ColumnValues::Float(Vec::new()),
            FieldType::Integer => ColumnValues::Integer(Vec::new()),
            FieldType::UInteger => ColumnValues::UInteger(Vec::new()),
            FieldType::String => ColumnValues::String(StringColumn::new()),
            FieldType::Boolean => ColumnValues::Boolean(Vec::new()),
        }
    }

    pub fn field_type(&self) -> FieldType {
        match self {
            ColumnValues::Float(_) => FieldType::Float,
            ColumnValues::Integer(_) => FieldType::Integer,
            ColumnValues::UInteger(_) => FieldType::UInteger,
            ColumnValues::String(_) => FieldType::String,
            ColumnValues::Boolean(_) => FieldType::Boolean,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ColumnValues::Float(v) => v.len(),
            ColumnValues::Integer(v) => v.len(),
            ColumnValues::UInteger(v) => v.len(),
            ColumnValues::String(v) => v.len(),
            ColumnValues::Boolean(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the type's default value (the placeholder of a null).
    pub(crate) fn push_default(&mut self) {
        match self {
            ColumnValues::Float(v) => v.push(0.0),
            ColumnValues::Integer(v) => v.push(0),
            ColumnValues::UInteger(v) => v.push(0),
            ColumnValues::String(v) => v.push_empty(),
            ColumnValues::Boolean(v) => v.push(false),
        }
    }

    /// Shortens to `rows` values (no-op if already shorter).
    pub(crate) fn truncate(&mut self, rows: usize) {
        match self {
            ColumnValues::Float(v) => v.truncate(rows),
            ColumnValues::Integer(v) => v.truncate(rows),
            ColumnValues::UInteger(v) => v.truncate(rows),
            ColumnValues::String(v) => v.truncate(rows),
            ColumnValues::Boolean(v) => v.truncate(rows),
        }
    }

    fn reserve(&mut self, rows: usize) {
        match self {
            ColumnValues::Float(v) => v.reserve(rows),
            ColumnValues::Integer(v) => v.reserve(rows),
            ColumnValues::UInteger(v) => v.reserve(rows),
            ColumnValues::String(v) => v.offsets.reserve(rows),
            ColumnValues::Boolean(v) => v.reserve(rows),
        }
    }

    fn retain(&mut self, keep: &[bool]) {
        fn filter<T: Copy>(v: &mut Vec<T>, keep: &[bool]) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                keep_row(keep, i - 1)
            });
        }
        match self {
            ColumnValues::Float(v) => filter(v, keep),
            ColumnValues::Integer(v) => filter(v, keep),
            ColumnValues::UInteger(v) => filter(v, keep),
            ColumnValues::String(v) => v.retain(keep),
            ColumnValues::Boolean(v) => filter(v, keep),
        }
    }
}

/// One field of a measurement: a value and a validity flag per row.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldColumn {
    /// Unescaped field key.
    pub name: String,
    pub values: ColumnValues,
    /// `false` where the row has no value for this field (null).
    pub valid: Vec<bool>,
}

impl FieldColumn {
    pub fn new(name: String, ty: FieldType) -> Self {
        FieldColumn {
            name,
            values: ColumnValues::new(ty),
            valid: Vec::new(),
        }
    }

    pub fn field_type(&self) -> FieldType {
        self.values.field_type()
    }

    pub fn len(&self) -> usize {
        self.valid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    /// Whether row `i` holds a value (false for nulls and out of range).
    pub fn is_valid(&self, i: usize) -> bool {
        self.valid.get(i).copied().unwrap_or(false)
    }

    /// Number of null rows.
    pub fn null_count(&self) -> usize {
        self.valid.iter().filter(|v| !**v).count()
    }

    /// Shortens the column to `rows` rows (no-op if already shorter).
    pub(crate) fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        self.values.truncate(rows);
    }

    /// Removes the last row, if any.
    pub(crate) fn pop_last(&mut self) {
        if let Some(last) = self.valid.len().checked_sub(1) {
            self.truncate(last);
        }
    }

    /// Reserves room for `rows` more rows.
    pub(crate) fn reserve(&mut self, rows: usize) {
        self.valid.reserve(rows);
        self.values.reserve(rows);
    }

    /// Appends nulls until the column has `rows` rows. Builders add rows
    /// lazily, so a field absent from many rows costs nothing until here.
    #[inline]
    pub(crate) fn pad_to(&mut self, rows: usize) {
        if self.valid.len() < rows {
            self.pad_slow(rows);
        }
    }

    #[cold]
    fn pad_slow(&mut self, rows: usize) {
        while self.valid.len() < rows {
            self.valid.push(false);
            self.values.push_default();
        }
    }
}

/// The tag set of one series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SeriesDef {
    /// [`crate::series::series_id_by`] of the batch measurement and `tags` under the server's
    /// rule.
    pub id: u64,
    /// Unescaped tags, sorted by key (then value).
    pub tags: Vec<(String, String)>,
}

impl SeriesDef {
    /// The id these tags have in `measurement` under `cluster_tag`'s rule: what `id` must be.
    pub fn expected_id(&self, measurement: &str, cluster_tag: Option<&str>) -> u64 {
        let tags: Vec<(&str, &str)> = self
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        crate::series::series_id_by(measurement, &tags, cluster_tag)
    }
}

/// All accepted rows of one measurement from one request body.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasurementBatch {
    /// Unescaped measurement name.
    pub measurement: String,
    /// Row timestamps, nanoseconds since the Unix epoch.
    pub time_ns: Vec<i64>,
    /// Row series ids; each has a matching entry in `series`.
    pub series_id: Vec<u64>,
    /// Source line (line protocol) or object index (msgpack) of each row,
    /// 1-based, so later stages can report errors against the input. Empty
    /// in a batch read back from the log, which does not keep them.
    pub line: Vec<u32>,
    /// Field columns; each has exactly `len()` rows.
    pub fields: Vec<FieldColumn>,
    /// The series first defined by this batch, in order of first appearance: every series of
    /// its rows when decoded without a schema, only those the schema did not already know
    /// otherwise ([`crate::SchemaLookup::known_series`]), and none once read back from the log.
    pub series: Vec<SeriesDef>,
}

/// A batch whose parts disagree (only possible for hand-built batches).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("column {what} has {got} rows, expected {expected}")]
    RowCount {
        what: String,
        got: usize,
        expected: usize,
    },
    #[error("string column {0:?} has invalid offsets or UTF-8")]
    BadStrings(String),
    #[error("duplicate field column {0:?}")]
    DuplicateField(String),
    #[error("duplicate series id {0:#018x}")]
    DuplicateSeries(u64),
}

impl MeasurementBatch {
    pub fn new(measurement: String) -> Self {
        MeasurementBatch {
            measurement,
            time_ns: Vec::new(),
            series_id: Vec::new(),
            line: Vec::new(),
            fields: Vec::new(),
            series: Vec::new(),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.time_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time_ns.is_empty()
    }

    /// Type of the field column `name`, if the batch has one.
    pub fn field_type(&self, name: &str) -> Option<FieldType> {
        self.field(name).map(FieldColumn::field_type)
    }

    /// The field column `name`.
    pub fn field(&self, name: &str) -> Option<&FieldColumn> {
        self.fields.iter().find(|c| c.name == name)
    }

    /// The tag set of series `id`.
    pub fn series_def(&self, id: u64) -> Option<&SeriesDef> {
        self.series.iter().find(|s| s.id == id)
    }

    /// Keeps only rows `i` with `keep[i] == true`; rows past the end of
    /// `keep` are kept (never drop data because of a short mask). Series no
    /// longer used and field columns left without any value are removed, so
    /// the batch looks as if the dropped rows had never been parsed.
    pub fn retain_rows(&mut self, keep: &[bool]) {
        if (0..self.len()).all(|i| keep_row(keep, i)) {
            return;
        }
        let mut i = 0;
        self.time_ns.retain(|_| {
            i += 1;
            keep_row(keep, i - 1)
        });
        let mut i = 0;
        self.series_id.retain(|_| {
            i += 1;
            keep_row(keep, i - 1)
        });
        let mut i = 0;
        self.line.retain(|_| {
            i += 1;
            keep_row(keep, i - 1)
        });
        for col in &mut self.fields {
            col.values.retain(keep);
            let mut i = 0;
            col.valid.retain(|_| {
                i += 1;
                keep_row(keep, i - 1)
            });
        }
        self.fields.retain(|c| c.valid.iter().any(|v| *v));
        let used: HashSet<u64> = self.series_id.iter().copied().collect();
        self.series.retain(|s| used.contains(&s.id));
    }

    /// Checks the structural invariants the rest of sluice relies on: equal
    /// column lengths, sound string offsets, unique field names and series,
    /// and a series definition for every row.
    pub fn validate(&self) -> Result<(), BatchError> {
        let rows = self.len();
        let check = |what: &str, got: usize| {
            if got == rows {
                Ok(())
            } else {
                Err(BatchError::RowCount {
                    what: what.to_owned(),
                    got,
                    expected: rows,
                })
            }
        };
        check("series_id", self.series_id.len())?;
        // Line numbers exist only while a request is answered (the log does not keep them).
        if !self.line.is_empty() {
            check("line", self.line.len())?;
        }
        let mut names = HashSet::new();
        for col in &self.fields {
            check(&col.name, col.valid.len())?;
            check(&col.name, col.values.len())?;
            if let ColumnValues::String(s) = &col.values {
                if !strings_are_sound(s) {
                    return Err(BatchError::BadStrings(col.name.clone()));
                }
            }
            if !names.insert(col.name.as_str()) {
                return Err(BatchError::DuplicateField(col.name.clone()));
            }
        }
        let mut ids = HashSet::new();
        for s in &self.series {
            if !ids.insert(s.id) {
                return Err(BatchError::DuplicateSeries(s.id));
            }
        }
        Ok(())
    }

    /// Pads every column to `len()` rows (builders add nulls lazily).
    pub(crate) fn pad_columns(&mut self) {
        let rows = self.len();
        for col in &mut self.fields {
            col.pad_to(rows);
        }
    }
}

/// Whether string offsets start at 0, never decrease, end at `data.len()`,
/// and every value is valid UTF-8.
pub(crate) fn strings_are_sound(s: &StringColumn) -> bool {
    if s.offsets.first() != Some(&0) || s.offsets.last().map(|&e| e as usize) != Some(s.data.len())
    {
        return false;
    }
    s.offsets.windows(2).all(|w| {
        w[0] <= w[1]
            && s.data
                .get(w[0] as usize..w[1] as usize)
                .is_some_and(|b| std::str::from_utf8(b).is_ok())
    })
}

#[inline]
fn keep_row(keep: &[bool], i: usize) -> bool {
    keep.get(i).copied().unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MeasurementBatch {
        let mut b = MeasurementBatch::new("m".into());
        b.time_ns = vec![1, 2, 3];
        b.series_id = vec![10, 20, 10];
        b.line = vec![1, 2, 3];
        b.series = vec![
            SeriesDef {
                id: 10,
                tags: vec![("a".into(), "1".into())],
            },
            SeriesDef {
                id: 20,
                tags: vec![("a".into(), "2".into())],
            },
        ];
        let mut s = StringColumn::new();
        for v in ["x", "", "zz"] {
            s.try_push(v).unwrap();
        }
        b.fields = vec![
            FieldColumn {
                name: "f".into(),
                values: ColumnValues::Float(vec![1.0, 2.0, 3.0]),
                valid: vec![true, true, true],
            },
            FieldColumn {
                name: "s".into(),
                values: ColumnValues::String(s),
                valid: vec![true, false, true],
            },
            FieldColumn {
                name: "only2".into(),
                values: ColumnValues::Integer(vec![0, 7, 0]),
                valid: vec![false, true, false],
            },
        ];
        b
    }

    #[test]
    fn field_type_names_match_influxdb() {
        assert_eq!(FieldType::UInteger.name(), "unsigned");
        assert_eq!(FieldType::Boolean.to_string(), "boolean");
    }

    #[test]
    fn retain_rows_drops_rows_series_and_empty_columns() {
        let mut b = sample();
        b.validate().unwrap();
        b.retain_rows(&[true, false, true]);
        b.validate().unwrap();
        assert_eq!(b.time_ns, vec![1, 3]);
        assert_eq!(b.line, vec![1, 3]);
        assert_eq!(b.series.len(), 1);
        assert_eq!(b.series[0].id, 10);
        assert!(b.field("only2").is_none(), "all-null column removed");
        let ColumnValues::String(s) = &b.field("s").unwrap().values else {
            panic!("string column")
        };
        assert_eq!((s.get(0), s.get(1)), (Some("x"), Some("zz")));
    }

    #[test]
    fn retain_rows_keeps_rows_past_short_mask() {
        let mut b = sample();
        b.retain_rows(&[false]);
        assert_eq!(b.time_ns, vec![2, 3]);
        b.validate().unwrap();
    }

    #[test]
    fn validate_catches_inconsistencies() {
        let mut b = sample();
        b.fields[0].valid.pop();
        assert!(matches!(b.validate(), Err(BatchError::RowCount { .. })));
        let mut b = sample();
        if let ColumnValues::String(s) = &mut b.fields[1].values {
            s.offsets[1] = 100;
        }
        assert!(matches!(b.validate(), Err(BatchError::BadStrings(_))));
    }

    #[test]
    fn string_column_get_is_total() {
        let mut s = StringColumn::new();
        s.try_push("ü").unwrap();
        assert_eq!(s.get(0), Some("ü"));
        assert_eq!(s.get(1), None);
        s.offsets[1] = 1; // splits the multi-byte char
        assert_eq!(s.get(0), None);
    }
}
