//! Per-line (per-object) rejection reasons, worded like InfluxDB 1.8 so
//! existing clients and runbooks recognise them.

use crate::batch::FieldType;
use std::fmt;

/// Longest excerpt of the offending input kept in an error.
pub const EXCERPT_MAX_BYTES: usize = 256;

/// What the error position counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A line-protocol line (1-based physical line where it starts).
    Line,
    /// A msgpack object (1-based index in the body).
    Object,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Line => "line",
            Origin::Object => "object",
        })
    }
}

/// One rejected line or msgpack object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number, or object index when `origin` is `Object`.
    pub line: usize,
    pub kind: LineErrorKind,
    /// The offending line (or the object's measurement), at most
    /// [`EXCERPT_MAX_BYTES`], cut at a character boundary.
    pub excerpt: String,
    pub origin: Origin,
}

impl LineError {
    /// An error for line-protocol line `line`, excerpting `raw`.
    pub fn for_line(line: usize, kind: LineErrorKind, raw: &[u8]) -> Self {
        LineError {
            line,
            kind,
            excerpt: excerpt(raw),
            origin: Origin::Line,
        }
    }

    /// An error for msgpack object `index` (1-based).
    pub fn for_object(index: usize, kind: LineErrorKind, measurement: &str) -> Self {
        LineError {
            line: index,
            kind,
            excerpt: excerpt(measurement.as_bytes()),
            origin: Origin::Object,
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.line;
        if self.kind.is_schema_error() {
            // InfluxDB reports these without the "unable to parse" prefix.
            return write!(f, "{} ({} {n})", self.kind, self.origin);
        }
        match self.origin {
            Origin::Line => write!(
                f,
                "unable to parse '{}': {} (line {n})",
                self.excerpt, self.kind
            ),
            Origin::Object if self.excerpt.is_empty() => {
                write!(f, "unable to parse object {n}: {}", self.kind)
            }
            Origin::Object => write!(
                f,
                "unable to parse object {n} (measurement {:?}): {}",
                self.excerpt, self.kind
            ),
        }
    }
}

impl std::error::Error for LineError {}

/// Why a line or object was rejected. Messages follow InfluxDB 1.8 word for word where it
/// has an equivalent (clients and the differential test compare them); the field is still
/// carried for callers that want it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineErrorKind {
    #[error("missing measurement")]
    MissingMeasurement,
    #[error("missing tag key")]
    MissingTagKey,
    #[error("missing tag value")]
    MissingTagValue,
    /// A tag value with an unescaped `=`.
    #[error("invalid tag format")]
    InvalidTagFormat,
    #[error("duplicate tags")]
    DuplicateTags,
    #[error("missing fields")]
    MissingFields,
    #[error("missing field key")]
    MissingFieldKey,
    #[error("missing field value")]
    MissingFieldValue { field: String },
    /// A field that is not `key=value` (e.g. `cpu v`, or `a="x"y`);
    /// `field` is the (unescaped) key as far as it could be read.
    #[error("invalid field format")]
    InvalidField { field: String },
    #[error("invalid number")]
    BadNumber { field: String },
    #[error("value out of range for field {field:?}")]
    IntegerOutOfRange { field: String },
    /// NaN or ±Inf (including float overflow such as `1e999`), which
    /// InfluxDB rejects.
    #[error("invalid number for field {field:?}: NaN and infinity are not supported")]
    NonFiniteFloat { field: String },
    #[error("invalid boolean")]
    InvalidBoolean { field: String },
    #[error("unbalanced quotes")]
    UnterminatedString,
    #[error("bad timestamp")]
    BadTimestamp,
    #[error(
        "time outside range {} - {}",
        crate::body::MIN_TIME_NS,
        crate::body::MAX_TIME_NS
    )]
    TimestampOutOfRange,
    #[error("invalid UTF-8")]
    InvalidUtf8,
    #[error("max key length exceeded: {len} > {max}", max = crate::lp::MAX_KEY_LEN)]
    KeyTooLong { len: usize },
    #[error("string column exceeds 4 GiB")]
    ColumnFull,
    /// A tag named `time` (the timestamp column).
    #[error("invalid tag key: input tag \"time\" on measurement {measurement:?} is invalid")]
    ReservedTagKey { measurement: String },
    /// A field named `time` (the timestamp column).
    #[error("invalid field name: input field \"time\" on measurement {measurement:?} is invalid")]
    ReservedFieldKey { measurement: String },
    #[error(
        "field type conflict: input field {field:?} on measurement {measurement:?} is type {input}, already exists as type {existing}"
    )]
    FieldTypeConflict {
        field: String,
        measurement: String,
        existing: FieldType,
        input: FieldType,
    },
    /// msgpack bytes that cannot be decoded (truncated, bad marker, ...).
    #[error("malformed msgpack: {reason}")]
    MalformedMsgpack { reason: String },
    /// A msgpack object without a required key.
    #[error("missing key {key:?}")]
    MissingKey { key: &'static str },
    /// A msgpack value of the wrong msgpack type.
    #[error("{what} must be {expected}")]
    WrongType {
        what: String,
        expected: &'static str,
    },
    #[error("duplicate key {key:?}")]
    DuplicateKey { key: String },
    #[error("field {field:?} has {actual} values but there are {expected} timestamps")]
    FieldLengthMismatch {
        field: String,
        expected: usize,
        actual: usize,
    },
    /// A msgpack field array mixing strings, booleans and numbers, or
    /// negative and beyond-`i64` integers.
    #[error("field {field:?} mixes incompatible value types")]
    MixedTypes { field: String },
    /// A msgpack row where every field is nil: a point needs a field.
    #[error("row {row} has no field values")]
    EmptyRow { row: usize },
    /// A measurement or field name with a byte the tables cannot hold in a name.
    #[error("invalid {what} name {name:?}: {reason}")]
    InvalidName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("max-fields limit exceeded: measurement {measurement:?} would have more than {limit} fields")]
    TooManyFields { measurement: String, limit: usize },
    #[error("max-tags limit exceeded: {count} tags, at most {limit} per series")]
    TooManyTags { count: usize, limit: usize },
    #[error("max-measurements limit exceeded: more than {limit} measurements")]
    TooManyMeasurements { limit: usize },
    /// More new series in one body than it may define.
    #[error("max-series limit exceeded: more than {limit} new series in one request")]
    SeriesLimit { limit: usize },
    /// The body's batches would hold more values than its size allows.
    #[error("too many sparse fields: the request's rows times their distinct fields exceed {limit} values; send fewer distinct fields per measurement or smaller requests")]
    TooSparse { limit: usize },
}

impl LineErrorKind {
    /// Errors about the stored schema rather than the syntax (InfluxDB
    /// words them without "unable to parse").
    pub fn is_schema_error(&self) -> bool {
        matches!(
            self,
            LineErrorKind::FieldTypeConflict { .. }
                | LineErrorKind::ReservedTagKey { .. }
                | LineErrorKind::ReservedFieldKey { .. }
                | LineErrorKind::InvalidName { .. }
                | LineErrorKind::TooManyFields { .. }
                | LineErrorKind::TooManyMeasurements { .. }
                | LineErrorKind::TooManyTags { .. }
                | LineErrorKind::SeriesLimit { .. }
                | LineErrorKind::TooSparse { .. }
        )
    }
}

/// `raw` cut to at most [`EXCERPT_MAX_BYTES`] at a character boundary,
/// without a trailing `\r`; invalid UTF-8 is replaced, not dropped.
pub fn excerpt(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let mut cut = raw.len().min(EXCERPT_MAX_BYTES);
    // Step back over UTF-8 continuation bytes (at most 3) so a multi-byte
    // character is not split.
    let mut back = 0;
    while cut < raw.len() && back < 3 && raw.get(cut).is_some_and(|b| b & 0xC0 == 0x80) {
        cut -= 1;
        back += 1;
    }
    let mut s = String::from_utf8_lossy(&raw[..cut]).into_owned();
    // Each invalid byte becomes U+FFFD (3 bytes): cut again so the bound holds.
    if s.len() > EXCERPT_MAX_BYTES {
        let mut end = EXCERPT_MAX_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_of_invalid_utf8_stays_within_the_bound() {
        let e = excerpt(&[0xff; 1000]);
        assert!(e.len() <= EXCERPT_MAX_BYTES, "{}", e.len());
        assert!(e.starts_with('\u{fffd}'));
    }

    #[test]
    fn display_matches_influxdb() {
        let e = LineError::for_line(3, LineErrorKind::MissingFields, b"cpu\r");
        assert_eq!(
            e.to_string(),
            "unable to parse 'cpu': missing fields (line 3)"
        );
        let e = LineError::for_line(
            7,
            LineErrorKind::FieldTypeConflict {
                field: "f".into(),
                measurement: "m".into(),
                existing: FieldType::Float,
                input: FieldType::Integer,
            },
            b"m f=1i",
        );
        assert_eq!(
            e.to_string(),
            "field type conflict: input field \"f\" on measurement \"m\" is type integer, already exists as type float (line 7)"
        );
        let e = LineError::for_object(2, LineErrorKind::MissingKey { key: "fields" }, "cpu");
        assert_eq!(
            e.to_string(),
            "unable to parse object 2 (measurement \"cpu\"): missing key \"fields\""
        );
        let e = LineError::for_line(1, LineErrorKind::TimestampOutOfRange, b"m f=1 1");
        assert!(e
            .to_string()
            .contains("time outside range -9223372036854775806 - 9223372036854775806"));
    }

    #[test]
    fn excerpt_cuts_at_char_boundary() {
        let long = "é".repeat(200); // 400 bytes
        let e = excerpt(long.as_bytes());
        assert_eq!(e.len(), 256);
        assert!(e.chars().all(|c| c == 'é'));
        let odd = format!("a{long}");
        let e = excerpt(odd.as_bytes());
        assert_eq!(e.len(), 255);
        assert_eq!(excerpt(b"\xffx"), "\u{fffd}x");
    }
}
