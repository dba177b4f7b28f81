//! Binary encoding of a [`MeasurementBatch`] for the write-ahead log.
//!
//! Columnar and fixed-width so encoding is mostly slice copies and decoding
//! allocates each column once. A trailing XXH3-64 checksum lets recovery
//! tell a torn or corrupted record from a valid one; decoding never panics
//! and never allocates more than the input can describe.
//!
//! # Format, version 4 (all integers little-endian)
//!
//! ```text
//! u8   version = 3
//! str  measurement                       (str = u32 byte length + UTF-8)
//! u32  rows = n
//! u8   time layout, then
//!      0: n × i64 time_ns
//!      1: u32 runs r, then r × (i64 time_ns, u32 rows): runs of equal times, summing to n
//! u8   series layout, then
//!      0: n × u64 series_id
//!      1: u32 ids d (1..=65536), d × u64 ids, then n × u16 index into them
//!      2: u32 ids d, d × u64 ids, then n × u32 index into them
//! u32  field count, then per field:
//!      str  name
//!      u8   type: 0 float, 1 integer, 2 unsigned, 3 string, 4 boolean
//!      u8   0: every value present, 1: ⌈n/8⌉ bytes validity bitmap follow
//!           (bit i%8 of byte i/8, 1 = value present)
//!      values: float: u8 layout, then
//!                0: n × 8 bytes (f64 bits)
//!                1: decimal: u8 exponent e (0..=9), i64 base, u8 width w (1, 2 or 4),
//!                   then n × w bytes offset o; the value is (base + o) as f64 / 10^e
//!              integer/unsigned: n × 8 bytes (i64, u64)
//!              boolean: ⌈n/8⌉ bytes bitmap
//!              string:  (n+1) × u32 offsets (first 0), then offsets[n] bytes of UTF-8
//! u64  XXH3-64 (seed 0) of every preceding byte
//! ```
//!
//! Every byte of an entry is checksummed by RocksDB, copied into its log, its memtable and
//! often an SST, so bytes per point are what the WAL costs. A request repeats each series a
//! few times and most of its points share a few timestamps (an agent stamps a whole
//! collection round with one time), which version 2 stored as 16 bytes per point; version 3
//! stores them in about 2-4. Each row still costs at least two bytes (a series index), so a
//! decoder can bound `n` by the input before allocating.
//!
//! Float fields are mostly decimals with a few digits (an agent's gauges, percentages,
//! counters), and their 8-byte bits were most of an entry: five such fields took 40 of 43
//! bytes per point. Version 4 stores a float column as scaled integers when every value
//! decodes back bit for bit (what VictoriaMetrics does for its blocks), in the fewest bytes
//! that hold the spread; other columns (full-precision noise, NaN, -0.0) stay raw.
//! Version 3 was version 4 without the float layout byte (always raw).
//!
//! Version 2 was version 3 with both layouts 0 and every field's bitmap present, without the
//! layout bytes.
//!
//! Version 1 also carried, after `series_id`, `n × u32` line numbers and the batch's series
//! definitions (`u32` count, then per series `u64` id, `u32` tag count, tags as `str` pairs).
//! Neither is needed once a write is durable (line numbers only answer the request; new series
//! travel in the series-table entry of the same WAL write), and together they were a third of
//! a typical entry, so version 2 drops them. Version 1 and 2 records still decode.
//!
//! Nulls are stored as the type's default value (0, false, ""). A new
//! layout must use a new version byte; `decode` keeps reading old ones.

use crate::batch::{
    BatchError, ColumnValues, FieldColumn, FieldType, MeasurementBatch, SeriesDef, StringColumn,
};
use crate::fasthash::IdMap;
use xxhash_rust::xxh3::xxh3_64;

/// Version byte written by [`encode`].
pub const FORMAT_VERSION: u8 = 4;

/// Why bytes could not be decoded into a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("encoded batch is too short ({0} bytes)")]
    TooShort(usize),
    #[error("unsupported batch encoding version {0}")]
    UnsupportedVersion(u8),
    #[error("batch checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    Checksum { stored: u64, computed: u64 },
    #[error("encoded batch truncated while reading {what}")]
    Truncated { what: &'static str },
    #[error("invalid UTF-8 in {what}")]
    InvalidUtf8 { what: &'static str },
    #[error("unknown field type code {0}")]
    UnknownFieldType(u8),
    #[error("corrupt {what}")]
    Corrupt { what: &'static str },
    #[error("{0} unexpected trailing bytes after the batch")]
    TrailingBytes(usize),
    #[error("decoded batch is inconsistent: {0}")]
    Inconsistent(#[from] BatchError),
}

/// Appends the encoding of `batch` to `out`. Line numbers and series definitions are not
/// encoded (see the module docs).
///
/// The output is always decodable: if a hand-built batch violates the
/// invariants of [`MeasurementBatch::validate`] (e.g. a short column), the
/// missing rows are written as nulls rather than producing garbage.
pub fn encode(batch: &MeasurementBatch, out: &mut Vec<u8>) {
    encode_version(batch, out, FORMAT_VERSION);
}

fn encode_version(batch: &MeasurementBatch, out: &mut Vec<u8>, version: u8) {
    let start = out.len();
    let n = batch.len();
    out.reserve(encoded_size_hint(batch));
    out.push(version);
    put_str(out, &batch.measurement);
    put_u32(out, n);
    if version >= 3 {
        put_times(out, &batch.time_ns, n);
        put_series(out, &batch.series_id, n);
    } else {
        put_fixed(out, &batch.time_ns, n, |v| v.to_le_bytes());
        put_fixed(out, &batch.series_id, n, |v| v.to_le_bytes());
    }
    if version == 1 {
        put_fixed(out, &batch.line, n, |v| v.to_le_bytes());
        put_u32(out, batch.series.len());
        for s in &batch.series {
            out.extend_from_slice(&s.id.to_le_bytes());
            put_u32(out, s.tags.len());
            for (k, v) in &s.tags {
                put_str(out, k);
                put_str(out, v);
            }
        }
    }
    put_u32(out, batch.fields.len());
    for col in &batch.fields {
        put_str(out, &col.name);
        out.push(type_code(col.field_type()));
        if version >= 3 && col.valid.len() >= n && col.valid[..n].iter().all(|v| *v) {
            out.push(0);
        } else {
            if version >= 3 {
                out.push(1);
            }
            put_bitmap(out, &col.valid, n);
        }
        match &col.values {
            ColumnValues::Float(v) if version >= 4 => put_floats(out, v, n),
            ColumnValues::Float(v) => put_fixed(out, v, n, |x| x.to_bits().to_le_bytes()),
            ColumnValues::Integer(v) => put_fixed(out, v, n, |x| x.to_le_bytes()),
            ColumnValues::UInteger(v) => put_fixed(out, v, n, |x| x.to_le_bytes()),
            ColumnValues::Boolean(v) => put_bitmap(out, v, n),
            ColumnValues::String(s) => put_strings(out, s, n),
        }
    }
    let sum = xxh3_64(&out[start..]);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// Decodes one batch written by [`encode`]; `bytes` must be exactly one
/// encoding.
pub fn decode(bytes: &[u8]) -> Result<MeasurementBatch, CodecError> {
    if bytes.len() < 1 + 8 {
        return Err(CodecError::TooShort(bytes.len()));
    }
    let (payload, sum) = bytes.split_at(bytes.len() - 8);
    let version = payload[0];
    if !matches!(version, 1..=FORMAT_VERSION) {
        return Err(CodecError::UnsupportedVersion(version));
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(sum);
    let stored = u64::from_le_bytes(stored);
    let computed = xxh3_64(payload);
    if stored != computed {
        return Err(CodecError::Checksum { stored, computed });
    }
    decode_payload(&payload[1..], version)
}

/// Decodes the payload (after the version byte, before the checksum),
/// validating every length, offset and string.
fn decode_payload(payload: &[u8], version: u8) -> Result<MeasurementBatch, CodecError> {
    let mut c = Cursor { buf: payload };
    let measurement = c.string("measurement")?;
    let n = c.u32("row count")? as usize;
    let (time_ns, series_id) = if version >= 3 {
        // Every row takes at least two bytes (its series index), so `n` is bounded by the
        // input before anything of size `n` is allocated.
        if n.saturating_mul(2) > c.buf.len() {
            return Err(CodecError::Truncated { what: "row count" });
        }
        (c.times(n)?, c.series(n)?)
    } else {
        (
            c.fixed(n, "timestamps", i64::from_le_bytes)?,
            c.fixed(n, "series ids", u64::from_le_bytes)?,
        )
    };
    let (line, series) = if version == 1 {
        let line = c.fixed(n, "line numbers", u32::from_le_bytes)?;
        let series_count = c.count(8 + 4, "series count")?;
        let mut series = Vec::with_capacity(series_count);
        for _ in 0..series_count {
            let id = c.u64("series id")?;
            let tag_count = c.count(8, "tag count")?;
            let mut tags = Vec::with_capacity(tag_count);
            for _ in 0..tag_count {
                tags.push((c.string("tag key")?, c.string("tag value")?));
            }
            series.push(SeriesDef { id, tags });
        }
        (line, series)
    } else {
        (Vec::new(), Vec::new())
    };

    let field_count = c.count(4 + 1, "field count")?;
    let mut fields = Vec::with_capacity(field_count);
    for _ in 0..field_count {
        let name = c.string("field name")?;
        let code = c.u8("field type")?;
        let ty = field_type(code).ok_or(CodecError::UnknownFieldType(code))?;
        let valid = match version {
            1 | 2 => c.bitmap(n, "validity bitmap")?,
            _ => match c.u8("validity layout")? {
                0 => vec![true; n],
                1 => c.bitmap(n, "validity bitmap")?,
                _ => {
                    return Err(CodecError::Corrupt {
                        what: "validity layout",
                    })
                }
            },
        };
        let values = match ty {
            FieldType::Float if version >= 4 => ColumnValues::Float(c.floats(n)?),
            FieldType::Float => ColumnValues::Float(
                c.fixed(n, "float values", |b| f64::from_bits(u64::from_le_bytes(b)))?,
            ),
            FieldType::Integer => {
                ColumnValues::Integer(c.fixed(n, "integer values", i64::from_le_bytes)?)
            }
            FieldType::UInteger => {
                ColumnValues::UInteger(c.fixed(n, "unsigned values", u64::from_le_bytes)?)
            }
            FieldType::Boolean => ColumnValues::Boolean(c.bitmap(n, "boolean values")?),
            FieldType::String => ColumnValues::String(c.strings(n)?),
        };
        fields.push(FieldColumn {
            name,
            values,
            valid,
        });
    }
    if !c.buf.is_empty() {
        return Err(CodecError::TrailingBytes(c.buf.len()));
    }
    let batch = MeasurementBatch {
        measurement,
        time_ns,
        series_id,
        line,
        fields,
        series,
    };
    batch.validate()?;
    Ok(batch)
}

/// Rough encoded size, to reserve once.
fn encoded_size_hint(batch: &MeasurementBatch) -> usize {
    let n = batch.len();
    let fields: usize = batch
        .fields
        .iter()
        .map(|c| {
            c.name.len()
                + 5
                + n / 8
                + 1
                + match &c.values {
                    ColumnValues::String(s) => 4 * (n + 1) + s.data.len(),
                    ColumnValues::Boolean(_) => n / 8 + 1,
                    _ => 8 * n,
                }
        })
        .sum();
    1 + 4 + batch.measurement.len() + 4 + 16 * n + 4 + fields + 8
}

const fn type_code(ty: FieldType) -> u8 {
    match ty {
        FieldType::Float => 0,
        FieldType::Integer => 1,
        FieldType::UInteger => 2,
        FieldType::String => 3,
        FieldType::Boolean => 4,
    }
}

const fn field_type(code: u8) -> Option<FieldType> {
    Some(match code {
        0 => FieldType::Float,
        1 => FieldType::Integer,
        2 => FieldType::UInteger,
        3 => FieldType::String,
        4 => FieldType::Boolean,
        _ => return None,
    })
}

/// Writes a length/count. Batches are bounded far below 4 Gi entries by
/// the request size limit; saturating keeps `encode` total regardless
/// (the result would then fail to decode rather than mis-decode).
fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Time layouts (see the module docs).
const TIME_RAW: u8 = 0;
const TIME_RUNS: u8 = 1;
/// Series layouts.
const SERIES_RAW: u8 = 0;
const SERIES_DICT16: u8 = 1;
const SERIES_DICT32: u8 = 2;

/// Writes `n` timestamps as runs when that is smaller (a run costs 12 bytes, a raw time 8).
fn put_times(out: &mut Vec<u8>, times: &[i64], n: usize) {
    if times.len() == n && n > 0 {
        let runs = 1 + times.windows(2).filter(|w| w[0] != w[1]).count();
        if runs * 12 < n * 8 {
            out.push(TIME_RUNS);
            put_u32(out, runs);
            let mut start = 0;
            for i in 1..=n {
                if i == n || times[i] != times[start] {
                    out.extend_from_slice(&times[start].to_le_bytes());
                    put_u32(out, i - start);
                    start = i;
                }
            }
            return;
        }
    }
    out.push(TIME_RAW);
    put_fixed(out, times, n, |v| v.to_le_bytes());
}

/// Float layouts (see the module docs).
const FLOAT_RAW: u8 = 0;
const FLOAT_DECIMAL: u8 = 1;
/// The largest decimal exponent tried: 10^9 keeps a mantissa of a value up to a million
/// within 2^53, where every integer is an exact f64.
const MAX_DECIMAL_EXP: usize = 9;
const POW10: [f64; MAX_DECIMAL_EXP + 1] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
/// Mantissas beyond this are not all exact as f64.
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;

/// `v` as a mantissa at `exp` that decodes back to exactly `v` (what [`Cursor::floats`]
/// computes), if there is one.
#[inline]
fn decimal_mantissa(v: f64, exp: usize) -> Option<i64> {
    let x = v * POW10[exp];
    // Also false for NaN.
    if x.abs().partial_cmp(&MAX_MANTISSA) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    // Round half away from zero by truncation (plain SSE2, no libm call); a mantissa off by
    // one simply fails the check below.
    let m = (x + 0.5f64.copysign(x)) as i64;
    ((m as f64 / POW10[exp]).to_bits() == v.to_bits()).then_some(m)
}

/// Writes `n` floats as decimals when all of them are (see the module docs), else raw.
fn put_floats(out: &mut Vec<u8>, values: &[f64], n: usize) {
    if let Some((exp, mantissas)) = decimals(values, n) {
        let (min, max) = mantissas
            .iter()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        // Both within ±2^53, so the spread fits a u64; a spread over 32 bits is no smaller
        // than raw.
        let width: Option<u8> = match max.abs_diff(min) {
            0..=0xff => Some(1),
            0x100..=0xffff => Some(2),
            0x1_0000..=0xffff_ffff => Some(4),
            _ => None,
        };
        if let Some(width) = width {
            out.push(FLOAT_DECIMAL);
            out.push(exp as u8);
            out.extend_from_slice(&min.to_le_bytes());
            out.push(width);
            let start = out.len();
            out.resize(start + n * usize::from(width), 0);
            let dst = &mut out[start..];
            match width {
                1 => put_offsets(dst, &mantissas, min, |o| [o as u8]),
                2 => put_offsets(dst, &mantissas, min, |o| (o as u16).to_le_bytes()),
                _ => put_offsets(dst, &mantissas, min, |o| (o as u32).to_le_bytes()),
            }
            return;
        }
    }
    out.push(FLOAT_RAW);
    put_fixed(out, values, n, |x| x.to_bits().to_le_bytes());
}

/// Writes each mantissa's offset from `min` into `dst`, `W` bytes each.
fn put_offsets<const W: usize>(
    dst: &mut [u8],
    mantissas: &[i64],
    min: i64,
    to_bytes: impl Fn(u64) -> [u8; W],
) {
    for (d, &m) in dst.chunks_exact_mut(W).zip(mantissas) {
        d.copy_from_slice(&to_bytes(m.abs_diff(min)));
    }
}

/// The smallest exponent at which every one of the first `n` values is a decimal, with their
/// mantissas. A value exact at one exponent is exact at every larger one (the same rational,
/// correctly rounded), so a value that needs more digits restarts the pass at its exponent:
/// at most [`MAX_DECIMAL_EXP`] restarts, usually none after the first few values.
fn decimals(values: &[f64], n: usize) -> Option<(usize, Vec<i64>)> {
    let values = values.get(..n).filter(|v| !v.is_empty())?;
    let mut exp = 0;
    let mut mantissas = Vec::with_capacity(n);
    'pass: loop {
        mantissas.clear();
        for &v in values {
            match decimal_mantissa(v, exp) {
                Some(m) => mantissas.push(m),
                None => {
                    exp =
                        (exp + 1..=MAX_DECIMAL_EXP).find(|&e| decimal_mantissa(v, e).is_some())?;
                    continue 'pass;
                }
            }
        }
        return Some((exp, mantissas));
    }
}

/// Writes `n` series ids as indexes into the distinct ids, unless most rows are distinct.
fn put_series(out: &mut Vec<u8>, ids: &[u64], n: usize) {
    if ids.len() == n && n > 0 {
        let mut index_of: IdMap<u32> = IdMap::default();
        let mut distinct: Vec<u64> = Vec::new();
        let mut index: Vec<u32> = Vec::with_capacity(n);
        for &id in ids {
            let i = *index_of.entry(id).or_insert_with(|| {
                distinct.push(id);
                (distinct.len() - 1) as u32
            });
            index.push(i);
            if distinct.len() > n / 2 {
                break;
            }
        }
        if distinct.len() <= n / 2 {
            let d = distinct.len();
            out.push(if d <= 1 << 16 {
                SERIES_DICT16
            } else {
                SERIES_DICT32
            });
            put_u32(out, d);
            put_fixed(out, &distinct, d, |v| v.to_le_bytes());
            if d <= 1 << 16 {
                put_fixed(out, &index, n, |i| (i as u16).to_le_bytes());
            } else {
                put_fixed(out, &index, n, |i| i.to_le_bytes());
            }
            return;
        }
    }
    out.push(SERIES_RAW);
    put_fixed(out, ids, n, |v| v.to_le_bytes());
}

/// Writes exactly `n` fixed-width values, padding a short slice with
/// defaults.
fn put_fixed<T: Copy + Default, const W: usize>(
    out: &mut Vec<u8>,
    values: &[T],
    n: usize,
    to_bytes: impl Fn(T) -> [u8; W],
) {
    let start = out.len();
    out.resize(start + n * W, 0);
    let have = values.len().min(n);
    let (present, missing) = out[start..].split_at_mut(have * W);
    // Whole-slice chunks compile to plain stores; pushing value by value checked the capacity
    // every time.
    for (dst, v) in present.chunks_exact_mut(W).zip(&values[..have]) {
        dst.copy_from_slice(&to_bytes(*v));
    }
    let default = to_bytes(T::default());
    for dst in missing.chunks_exact_mut(W) {
        dst.copy_from_slice(&default);
    }
}

/// Writes `n` booleans as a bitmap (missing entries are `false`).
fn put_bitmap(out: &mut Vec<u8>, bits: &[bool], n: usize) {
    let have = bits.len().min(n);
    out.extend(bits[..have].chunks(8).map(|chunk| {
        chunk
            .iter()
            .enumerate()
            .fold(0u8, |byte, (bit, &set)| byte | (u8::from(set) << bit))
    }));
    // Missing entries are false.
    out.resize(out.len() + n.div_ceil(8) - have.div_ceil(8), 0);
}

fn put_strings(out: &mut Vec<u8>, s: &StringColumn, n: usize) {
    let sound = s.offsets.len() == n + 1
        && s.offsets.first() == Some(&0)
        && s.offsets.last().map(|&e| e as usize) == Some(s.data.len())
        && s.offsets.windows(2).all(|w| w[0] <= w[1]);
    if sound {
        put_fixed(out, &s.offsets, n + 1, |v| v.to_le_bytes());
        out.extend_from_slice(&s.data);
        return;
    }
    // Inconsistent column: re-encode value by value (bad entries empty).
    let values: Vec<&str> = (0..n).map(|i| s.get(i).unwrap_or_default()).collect();
    let mut end = 0u32;
    out.extend_from_slice(&end.to_le_bytes());
    for v in &values {
        end = end.saturating_add(u32::try_from(v.len()).unwrap_or(u32::MAX));
        out.extend_from_slice(&end.to_le_bytes());
    }
    for v in &values {
        out.extend_from_slice(v.as_bytes());
    }
}

/// Bounds-checked reader over the payload.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], CodecError> {
        if n > self.buf.len() {
            return Err(CodecError::Truncated { what });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CodecError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, CodecError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items each needing at least `min_item_bytes`, rejected
    /// if the rest of the input could not hold them (bounds allocation).
    fn count(&mut self, min_item_bytes: usize, what: &'static str) -> Result<usize, CodecError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_item_bytes) > self.buf.len() {
            return Err(CodecError::Truncated { what });
        }
        Ok(n)
    }

    fn string(&mut self, what: &'static str) -> Result<String, CodecError> {
        let len = self.u32(what)? as usize;
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| CodecError::InvalidUtf8 { what })
    }

    fn fixed<T, const W: usize>(
        &mut self,
        n: usize,
        what: &'static str,
        from_bytes: impl Fn([u8; W]) -> T,
    ) -> Result<Vec<T>, CodecError> {
        let len = n.checked_mul(W).ok_or(CodecError::Truncated { what })?;
        let bytes = self.take(len, what)?;
        Ok(bytes
            .chunks_exact(W)
            .map(|chunk| {
                let mut a = [0u8; W];
                a.copy_from_slice(chunk);
                from_bytes(a)
            })
            .collect())
    }

    /// `n` floats in a version 4 layout.
    fn floats(&mut self, n: usize) -> Result<Vec<f64>, CodecError> {
        match self.u8("float layout")? {
            FLOAT_RAW => self.fixed(n, "float values", |b| f64::from_bits(u64::from_le_bytes(b))),
            FLOAT_DECIMAL => {
                let exp = usize::from(self.u8("decimal exponent")?);
                let scale = *POW10.get(exp).ok_or(CodecError::Corrupt {
                    what: "decimal exponent",
                })?;
                let base = self.u64("decimal base")? as i64;
                let decode = |o: u64| -> Result<f64, CodecError> {
                    base.checked_add_unsigned(o)
                        .map(|m| m as f64 / scale)
                        .ok_or(CodecError::Corrupt {
                            what: "decimal offset",
                        })
                };
                let offsets = match self.u8("decimal width")? {
                    1 => self.fixed(n, "decimal offsets", |b: [u8; 1]| u64::from(b[0]))?,
                    2 => self.fixed(n, "decimal offsets", |b| u64::from(u16::from_le_bytes(b)))?,
                    4 => self.fixed(n, "decimal offsets", |b| u64::from(u32::from_le_bytes(b)))?,
                    _ => {
                        return Err(CodecError::Corrupt {
                            what: "decimal width",
                        })
                    }
                };
                offsets.into_iter().map(decode).collect()
            }
            _ => Err(CodecError::Corrupt {
                what: "float layout",
            }),
        }
    }

    /// `n` timestamps in a version 3 layout.
    fn times(&mut self, n: usize) -> Result<Vec<i64>, CodecError> {
        match self.u8("time layout")? {
            TIME_RAW => self.fixed(n, "timestamps", i64::from_le_bytes),
            TIME_RUNS => {
                let runs = self.count(12, "time runs")?;
                let mut out = Vec::with_capacity(n);
                for _ in 0..runs {
                    let t = self.u64("run time")? as i64;
                    let len = self.u32("run length")? as usize;
                    if len == 0 || len > n - out.len() {
                        return Err(CodecError::Corrupt { what: "time runs" });
                    }
                    out.resize(out.len() + len, t);
                }
                if out.len() != n {
                    return Err(CodecError::Corrupt { what: "time runs" });
                }
                Ok(out)
            }
            _ => Err(CodecError::Corrupt {
                what: "time layout",
            }),
        }
    }

    /// `n` series ids in a version 3 layout.
    fn series(&mut self, n: usize) -> Result<Vec<u64>, CodecError> {
        let layout = self.u8("series layout")?;
        if layout == SERIES_RAW {
            return self.fixed(n, "series ids", u64::from_le_bytes);
        }
        let d = self.count(8, "distinct series")?;
        let ids = self.fixed(d, "distinct series", u64::from_le_bytes)?;
        let index = match layout {
            SERIES_DICT16 if d <= 1 << 16 => {
                self.fixed(n, "series indexes", |b| u32::from(u16::from_le_bytes(b)))?
            }
            SERIES_DICT32 => self.fixed(n, "series indexes", u32::from_le_bytes)?,
            _ => {
                return Err(CodecError::Corrupt {
                    what: "series layout",
                })
            }
        };
        index
            .iter()
            .map(|&i| ids.get(i as usize).copied())
            .collect::<Option<Vec<u64>>>()
            .ok_or(CodecError::Corrupt {
                what: "series index",
            })
    }

    fn bitmap(&mut self, n: usize, what: &'static str) -> Result<Vec<bool>, CodecError> {
        let bytes = self.take(n.div_ceil(8), what)?;
        Ok((0..n).map(|i| bytes[i / 8] & (1 << (i % 8)) != 0).collect())
    }

    fn strings(&mut self, n: usize) -> Result<StringColumn, CodecError> {
        let what = "string offsets";
        let offsets = self.fixed(
            n.checked_add(1).ok_or(CodecError::Truncated { what })?,
            what,
            u32::from_le_bytes,
        )?;
        if offsets.first() != Some(&0) || offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(CodecError::Corrupt { what });
        }
        let len = offsets.last().map_or(0, |&e| e as usize);
        let data = self.take(len, "string data")?;
        let text = std::str::from_utf8(data).map_err(|_| CodecError::InvalidUtf8 {
            what: "string values",
        })?;
        if !offsets.iter().all(|&o| text.is_char_boundary(o as usize)) {
            return Err(CodecError::Corrupt {
                what: "string offsets (split a character)",
            });
        }
        Ok(StringColumn {
            offsets,
            data: data.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::NoSchema;
    use crate::lp;
    use crate::precision::Precision;

    fn sample() -> MeasurementBatch {
        let body = "m,host=a,dc=x f=1.5,i=-3i,u=7u,s=\"hé\",b=t 1\n\
                    m,host=b f=-0.0,s=\"\" 2\n\
                    m,host=a i=9223372036854775807i,b=f,e=\"\" 3\n\
                    m,host=c u=18446744073709551615u 4\n\
                    m,host=a f=1e300,s=\"multi\nline\" -5\n\
                    m,host=b b=true 6\n\
                    m,host=b b=true 7\n\
                    m,host=b b=false,s=\"☃\" 8\n\
                    m,host=d i=0i 9\n";
        let out = lp::parse(
            body.as_bytes(),
            &lp::ParseOptions::new(Precision::Nanosecond, 0),
            &NoSchema,
        );
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        out.batches.into_iter().next().unwrap()
    }

    /// What the log keeps of a batch: everything but line numbers and series definitions.
    fn durable(batch: &MeasurementBatch) -> MeasurementBatch {
        let mut b = batch.clone();
        b.line.clear();
        b.series.clear();
        b
    }

    fn round_trip(batch: &MeasurementBatch) -> Vec<u8> {
        let mut buf = vec![0xAA]; // encode appends
        encode(batch, &mut buf);
        let enc = buf[1..].to_vec();
        assert_eq!(decode(&enc), Ok(durable(batch)));
        // Records written by version 1 still decode, with line numbers and series.
        let mut v1 = Vec::new();
        encode_version(batch, &mut v1, 1);
        assert_eq!(decode(&v1).as_ref(), Ok(batch));
        let mut v2 = Vec::new();
        encode_version(batch, &mut v2, 2);
        assert_eq!(decode(&v2), Ok(durable(batch)));
        let mut v3 = Vec::new();
        encode_version(batch, &mut v3, 3);
        assert_eq!(decode(&v3), Ok(durable(batch)));
        enc
    }

    /// A one-field batch of `values`, all present.
    fn floats_batch(values: &[f64]) -> MeasurementBatch {
        let mut b = MeasurementBatch::new("m".into());
        b.series_id = vec![7; values.len()];
        b.time_ns = (0..values.len() as i64).collect();
        b.fields.push(FieldColumn {
            name: "f".into(),
            values: ColumnValues::Float(values.to_vec()),
            valid: vec![true; values.len()],
        });
        b
    }

    /// Encodes `values` and returns the float layout byte and the encoding's length, after
    /// checking that every value decodes to the same bits (`==` would let -0.0 pass as 0.0).
    fn float_layout(values: &[f64]) -> (u8, usize) {
        let mut enc = Vec::new();
        encode(&floats_batch(values), &mut enc);
        let back = decode(&enc).expect("decodes");
        let ColumnValues::Float(got) = &back.fields[0].values else {
            panic!("not floats");
        };
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(got), bits(values), "{values:?}");
        let layout_at = enc.len() - 8 - float_bytes_len(&enc);
        (enc[layout_at], enc.len())
    }

    /// The length of the float column's encoding (layout byte onwards) at the end of `enc`.
    fn float_bytes_len(enc: &[u8]) -> usize {
        let payload = &enc[..enc.len() - 8];
        // Walk back: a raw column is 1 + 8n bytes, a decimal one 1 + 1 + 8 + 1 + wn bytes.
        let n = u32::from_le_bytes(payload[6..10].try_into().unwrap()) as usize;
        for w in [1usize, 2, 4] {
            let len = 11 + w * n;
            if len < payload.len()
                && payload[payload.len() - len] == FLOAT_DECIMAL
                && payload[payload.len() - len + 10] as usize == w
            {
                return len;
            }
        }
        1 + 8 * n
    }

    #[test]
    fn decimal_floats_take_the_fewest_bytes_and_decode_bit_for_bit() {
        // Two decimals, spread under 2^17: four bytes a value instead of eight.
        let gauges: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 100_000) as f64 / 100.0)
            .collect();
        let (layout, len) = float_layout(&gauges);
        assert_eq!(layout, FLOAT_DECIMAL);
        let (_, raw_len) = {
            let mut v3 = Vec::new();
            encode_version(&floats_batch(&gauges), &mut v3, 3);
            (0, v3.len())
        };
        assert!(len + 4 * 1000 - 16 <= raw_len, "{len} vs {raw_len}");
        // Whole numbers in a byte's spread, negative and with a large base.
        assert_eq!(float_layout(&[-3.0, 100.0, 250.0 - 3.0]).0, FLOAT_DECIMAL);
        assert_eq!(float_layout(&[1e12 + 1.0, 1e12 + 200.0]).0, FLOAT_DECIMAL);
        // Mixed exponents: 0.5 needs one digit, 0.125 three.
        assert_eq!(float_layout(&[0.5, 2.0, 0.125, 99.999]).0, FLOAT_DECIMAL);
        assert_eq!(
            float_layout(&[0.1, 0.2, 0.3, 1.7976931348623157e-300 * 0.0]).0,
            FLOAT_DECIMAL
        );
    }

    #[test]
    fn floats_that_are_not_exact_decimals_stay_raw() {
        for values in [
            vec![1.5, f64::NAN],
            vec![1.5, -0.0],
            vec![f64::INFINITY, 1.0],
            vec![std::f64::consts::PI, 2.0],
            vec![1e-10, 1.0],
            // Exact at 10^0, but a spread over 2^32 is no smaller than raw.
            vec![0.0, 1e15],
            vec![f64::MAX],
            vec![f64::MIN_POSITIVE],
        ] {
            assert_eq!(float_layout(&values).0, FLOAT_RAW, "{values:?}");
        }
    }

    #[test]
    fn decimal_mantissas_survive_every_exponent() {
        // A spread of magnitudes and digit counts, decoded bit for bit whatever layout wins.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for (exp, scale) in POW10.iter().enumerate() {
            let values: Vec<f64> = (0..500)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let m = (x % 2_000_000) as i64 - 1_000_000;
                    m as f64 / scale
                })
                .collect();
            let (layout, _) = float_layout(&values);
            assert_eq!(layout, FLOAT_DECIMAL, "exponent {exp}");
        }
    }

    #[test]
    fn corrupt_decimal_headers_are_errors() {
        let mut enc = Vec::new();
        encode(&floats_batch(&[1.25, 2.5, 3.75]), &mut enc);
        let payload_len = enc.len() - 8;
        let layout_at = payload_len - float_bytes_len(&enc);
        assert_eq!(enc[layout_at], FLOAT_DECIMAL);
        for (offset, byte, what) in [
            (0, 7, "float layout"),
            (1, 10, "decimal exponent"),
            (10, 3, "decimal width"),
        ] {
            let mut p = enc[1..payload_len].to_vec();
            p[layout_at - 1 + offset] = byte;
            assert_eq!(
                decode_payload(&p, FORMAT_VERSION).map(|_| ()),
                Err(CodecError::Corrupt { what }),
            );
        }
        // A base so large that base + offset overflows.
        let mut p = enc[1..payload_len].to_vec();
        p[layout_at + 1..layout_at + 9].copy_from_slice(&i64::MAX.to_le_bytes());
        assert_eq!(
            decode_payload(&p, FORMAT_VERSION).map(|_| ()),
            Err(CodecError::Corrupt {
                what: "decimal offset"
            }),
        );
    }

    /// A batch of `rows` rows over `series` series and `times` timestamps, all values present.
    fn shaped(rows: usize, series: usize, times: usize) -> MeasurementBatch {
        let mut b = MeasurementBatch::new("m".into());
        b.series_id = (0..rows)
            .map(|i| crate::series::series_id("m", &[("h", &(i % series).to_string())]))
            .collect();
        b.time_ns = (0..rows).map(|i| (i * times / rows) as i64 * 10).collect();
        b.line = (1..=rows as u32).collect();
        b.fields = vec![FieldColumn {
            name: "f".into(),
            values: ColumnValues::Float((0..rows).map(|i| i as f64).collect()),
            valid: vec![true; rows],
        }];
        b
    }

    /// The layout bytes of a version 3 encoding: (time, series).
    fn layouts(enc: &[u8]) -> (u8, u8) {
        let mut c = Cursor { buf: &enc[1..] };
        c.string("m").unwrap();
        let n = c.u32("n").unwrap() as usize;
        let time = c.buf[0];
        c.times(n).unwrap();
        (time, c.buf[0])
    }

    #[test]
    fn version_3_picks_the_smaller_layout_and_round_trips_each() {
        // (rows, series, distinct times) -> (time layout, series layout)
        for (rows, series, times, want) in [
            (50_000, 10_000, 5, (TIME_RUNS, SERIES_DICT16)),
            (1_000, 1, 1, (TIME_RUNS, SERIES_DICT16)),
            (1_000, 1_000, 1_000, (TIME_RAW, SERIES_RAW)),
            (1_000, 501, 900, (TIME_RAW, SERIES_RAW)),
            (1_000, 500, 600, (TIME_RUNS, SERIES_DICT16)),
            (140_000, 70_000, 2, (TIME_RUNS, SERIES_DICT32)),
        ] {
            let b = shaped(rows, series, times);
            let enc = round_trip(&b);
            assert_eq!(
                layouts(&enc),
                want,
                "{rows} rows, {series} series, {times} times"
            );
        }
        // 10,000 series and 5 times per 50,000 points: about 4 bytes per point besides the
        // values, where version 2 took 16.
        let b = shaped(50_000, 10_000, 5);
        let mut enc = Vec::new();
        encode(&b, &mut enc);
        assert!(enc.len() < 50_000 * (8 + 4), "{} bytes", enc.len());
    }

    #[test]
    fn version_3_rejects_inconsistent_runs_and_indexes() {
        let b = shaped(100, 3, 2);
        let mut enc = Vec::new();
        encode(&b, &mut enc);
        assert_eq!(layouts(&enc), (TIME_RUNS, SERIES_DICT16));
        let payload = enc[1..enc.len() - 8].to_vec();
        let header = 4 + 1 + 4; // measurement "m", n
                                // time layout, run count (2), first run: time, length
        let first_len = header + 1 + 4 + 8;
        let mut p = payload.clone();
        p[first_len..first_len + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            decode_payload(&p, 3),
            Err(CodecError::Corrupt { what: "time runs" })
        );
        let mut p = payload.clone();
        p[first_len..first_len + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            decode_payload(&p, 3),
            Err(CodecError::Corrupt { what: "time runs" })
        );
        // series layout, 3 ids, then the first index
        let series = header + 1 + 4 + 2 * 12;
        let first_index = series + 1 + 4 + 3 * 8;
        let mut p = payload.clone();
        p[first_index..first_index + 2].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(
            decode_payload(&p, 3),
            Err(CodecError::Corrupt {
                what: "series index"
            })
        );
        let mut p = payload;
        p[series] = 9;
        assert_eq!(
            decode_payload(&p, 3),
            Err(CodecError::Corrupt {
                what: "series layout"
            })
        );
    }

    #[test]
    fn round_trips_every_column_type_with_nulls() {
        let batch = sample();
        assert_eq!(batch.fields.len(), 6);
        for ty in [
            FieldType::Float,
            FieldType::Integer,
            FieldType::UInteger,
            FieldType::String,
            FieldType::Boolean,
        ] {
            assert!(batch.fields.iter().any(|c| c.field_type() == ty), "{ty}");
        }
        assert!(batch.fields.iter().all(|c| c.null_count() > 0));
        let enc = round_trip(&batch);
        assert!(enc.len() < encoded_size_hint(&batch) + 64);
        // -0.0 keeps its sign bit.
        let dec = decode(&enc).unwrap();
        let ColumnValues::Float(f) = &dec.field("f").unwrap().values else {
            panic!()
        };
        assert!(f[1].is_sign_negative());
    }

    #[test]
    fn round_trips_edge_shapes() {
        round_trip(&MeasurementBatch::new(String::new()));
        let mut b = MeasurementBatch::new("m".into());
        b.time_ns = vec![1];
        b.series_id = vec![5];
        b.line = vec![1];
        b.series = vec![SeriesDef {
            id: 5,
            tags: vec![],
        }];
        let mut s = StringColumn::new();
        s.try_push("").unwrap();
        b.fields = vec![FieldColumn {
            name: "only-empty".into(),
            values: ColumnValues::String(s),
            valid: vec![true],
        }];
        round_trip(&b);
        // Row counts that are not multiples of 8 and larger ones.
        for rows in [7, 8, 9, 1000] {
            let mut b = MeasurementBatch::new("m".into());
            b.series = vec![SeriesDef {
                id: 1,
                tags: vec![("k".into(), "v".into())],
            }];
            b.time_ns = (0..rows).map(|i| i as i64).collect();
            b.series_id = vec![1; rows];
            b.line = (0..rows).map(|i| i as u32).collect();
            b.fields = vec![FieldColumn {
                name: "b".into(),
                values: ColumnValues::Boolean((0..rows).map(|i| i % 3 == 0).collect()),
                valid: (0..rows).map(|i| i % 5 != 0).collect(),
            }];
            round_trip(&b);
        }
    }

    #[test]
    fn encode_of_inconsistent_batch_still_decodes_or_errors() {
        let mut b = sample();
        b.fields[0].valid.pop();
        if let ColumnValues::String(s) = &mut b.fields[3].values {
            s.offsets[1] = 999;
        }
        let mut enc = Vec::new();
        encode(&b, &mut enc);
        let dec = decode(&enc).unwrap();
        dec.validate().unwrap();
        assert_eq!(dec.len(), b.len());
    }

    #[test]
    fn rejects_bad_headers() {
        let mut enc = Vec::new();
        encode(&sample(), &mut enc);
        assert_eq!(decode(&[]), Err(CodecError::TooShort(0)));
        for version in [0, FORMAT_VERSION + 1, 255] {
            let mut other = enc.clone();
            other[0] = version;
            assert_eq!(decode(&other), Err(CodecError::UnsupportedVersion(version)));
        }
        let mut flipped = enc.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        assert!(matches!(decode(&flipped), Err(CodecError::Checksum { .. })));
        let mut trailing = enc.clone();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        for version in 1..=FORMAT_VERSION {
            let mut enc = Vec::new();
            encode_version(&sample(), &mut enc, version);
            for cut in 0..enc.len() {
                assert!(decode(&enc[..cut]).is_err(), "cut {cut}");
                // Also bypass the checksum to exercise the structural checks.
                if (1..enc.len() - 8).contains(&cut) {
                    assert!(
                        decode_payload(&enc[1..cut], version).is_err(),
                        "v{version} payload cut {cut}"
                    );
                }
            }
        }
    }

    #[test]
    fn corrupt_payloads_never_panic() {
        for version in 1..=FORMAT_VERSION {
            corrupt_payloads_of_version_never_panic(version);
        }
    }

    fn corrupt_payloads_of_version_never_panic(version: u8) {
        let mut enc = Vec::new();
        encode_version(&sample(), &mut enc, version);
        let payload = &enc[1..enc.len() - 8];
        let mut seed: u64 = 0x0123_4567_89AB_CDEF;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let mut p = payload.to_vec();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() % p.len() as u64) as usize;
                p[i] = next() as u8;
            }
            if let Ok(b) = decode_payload(&p, version) {
                b.validate().unwrap();
            }
            // Re-sealed with a valid checksum, the full decoder must agree.
            let mut sealed = vec![version];
            sealed.extend_from_slice(&p);
            let sum = xxh3_64(&sealed);
            sealed.extend_from_slice(&sum.to_le_bytes());
            assert_eq!(decode(&sealed).is_ok(), decode_payload(&p, version).is_ok());
        }
        for len in 0..200 {
            let noise: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            assert!(decode(&noise).is_err());
            let _ = decode_payload(&noise, version);
        }
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        // measurement "", rows = u32::MAX: must fail on length, not OOM.
        let mut p = Vec::new();
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_payload(&p, FORMAT_VERSION),
            Err(CodecError::Truncated { .. })
        ));
        let mut p = Vec::new();
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&u32::MAX.to_le_bytes()); // series count
        assert!(matches!(
            decode_payload(&p, 1),
            Err(CodecError::Truncated { .. })
        ));
    }
}
