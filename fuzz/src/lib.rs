//! What the fuzz targets check, shared with `core/tests/fuzz_regressions.rs` (which includes this
//! file by path), so a saved reproducer is replayed against exactly the invariants that failed.
//!
//! * [`check_lp`]: `lp::parse` of arbitrary bytes, without a schema; with a small stored schema
//!   (type conflicts against it) and, for about half the inputs, small limits on fields,
//!   measurements, tags and new series ([`options_for`]); and again with a schema that knows
//!   every series key the first parse validated (the cross-request fast path), which must give
//!   the same rows and errors. Every accepted batch then goes through the WAL codec, and the
//!   input's first token is parsed as a field value and as a timestamp and compared with a
//!   reference ([`expect_field`], `i64::from_str`).
//! * [`check_msgpack`]: `msgpack::decode` of arbitrary bytes, without a schema and with the
//!   schema and [`options_for`]; then every accepted batch through the WAL codec.
//!
//! Invariants of every decoded body: no panic; `points` is the sum of the batch lengths; every
//! batch is non-empty, valid (`MeasurementBatch::validate`: equal column lengths, sound strings,
//! unique fields and series) and has a line number per row, in input order; times in range;
//! floats finite; nulls hold the type's default; every column has a value; names storable and
//! never `time`; series definitions sorted, unique, with their canonical id; limits and the
//! stored schema's types respected; at most `MAX_KEPT_ERRORS` errors (+ one schema error) and
//! `rejected` at least that many; error excerpts bounded; allocation bounded
//! ([`parse_alloc_limit`]).
//! * [`check_codec`]: `codec::decode` of arbitrary bytes as they are and re-sealed with a valid
//!   checksum (so the structural checks behind it are reached), with a bound on the memory it
//!   allocates; batches built from the bytes, and whatever `lp::parse` accepts of them, must
//!   encode and decode back to the same batch.
//!
//! Everything depends only on `sluice-core` and `xxhash-rust` (both already dependencies of
//! sluice-core) and the standard library.

use sluice_core::body::{MAX_KEPT_ERRORS, MAX_TIME_NS, MIN_TIME_NS};
use sluice_core::line_error::EXCERPT_MAX_BYTES;
use sluice_core::{
    codec, lp, msgpack, names, ColumnValues, FieldColumn, FieldType, KeyHash, MeasurementBatch,
    NoSchema, Origin, ParseOptions, ParsedBody, Precision, SchemaLookup, SeriesDef, StringColumn,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};

/// "Now" for points without a timestamp.
pub const NOW_NS: i64 = 1_700_000_000_123_456_789;

const PRECISIONS: [Precision; 6] = [
    Precision::Nanosecond,
    Precision::Microsecond,
    Precision::Millisecond,
    Precision::Second,
    Precision::Minute,
    Precision::Hour,
];

// ---------------------------------------------------------------------------------------------
// Allocation meter

/// A global allocator that forwards to the system allocator and keeps, per thread, the bytes
/// currently allocated and their peak, so a check can bound what one call allocates. Install it
/// with `#[global_allocator] static A: sluice_fuzz::Meter = sluice_fuzz::Meter;`; without it
/// [`measure`] reports 0 and the memory bounds are not checked.
pub struct Meter;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(n);
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

/// Runs `f` and returns its result with the peak of the bytes it had allocated at once (on
/// this thread, beyond what was allocated before the call), 0 without the [`Meter`].
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get);
    (r, peak.saturating_sub(base))
}

/// The most `codec::decode` may allocate for `len` input bytes. Every row of an entry takes at
/// least two bytes and every value at least a bit, so a decoded batch is a small multiple of its
/// encoding (a column of booleans with the "all present" validity is 2 bytes per input bit).
pub fn codec_alloc_limit(len: usize) -> usize {
    64 * len + (1 << 20)
}

/// The most a body decoder may allocate for a `len`-byte body: a generous multiple of what its
/// rows, series and (at most [`MAX_KEPT_ERRORS`] + 1) errors take, plus room for the values
/// every body may hold whatever its size (the decoders allow a million, nulls included).
pub fn parse_alloc_limit(len: usize) -> usize {
    256 * len + (64 << 20)
}

/// Tag keys that [`options_for`] clusters series ids by.
const CLUSTER_TAGS: &[&str] = &["host", "dc", "rack", "region"];

/// Options for `body`: no limits, or (for about half the inputs) small limits on fields,
/// measurements, tags and new series, picked by the length, in a precision picked by the length.
pub fn options_for(body: &[u8]) -> ParseOptions {
    let n = body.len();
    let mut opts = ParseOptions::new(PRECISIONS[n % PRECISIONS.len()], NOW_NS);
    if (n / PRECISIONS.len()) % 2 == 1 {
        opts.max_fields = 1 + n % 5;
        opts.max_measurements = 1 + n % 3;
        opts.max_tags = n % 4;
        opts.max_new_series = 1 + n % 7;
    }
    // Every third length clusters ids by a tag key the generated bodies use.
    if n.is_multiple_of(3) {
        opts.cluster_tag = Some(CLUSTER_TAGS[n / 3 % CLUSTER_TAGS.len()].into());
    }
    opts
}

// ---------------------------------------------------------------------------------------------
// Schemas

/// The stored schema of the checks that run with one: a few common measurement and field names
/// with every type, so lines and objects that use them hit type conflicts.
pub fn small_schema() -> HashMap<String, HashMap<String, FieldType>> {
    let fields = |pairs: &[(&str, FieldType)]| {
        pairs
            .iter()
            .map(|(k, t)| ((*k).to_owned(), *t))
            .collect::<HashMap<_, _>>()
    };
    let mut s = HashMap::new();
    s.insert(
        "m".to_owned(),
        fields(&[
            ("f", FieldType::Float),
            ("i", FieldType::Integer),
            ("u", FieldType::UInteger),
            ("s", FieldType::String),
            ("b", FieldType::Boolean),
            ("v", FieldType::Integer),
        ]),
    );
    s.insert(
        "cpu".to_owned(),
        fields(&[
            ("v", FieldType::Float),
            ("value", FieldType::Float),
            ("usage_idle", FieldType::Float),
            ("i", FieldType::UInteger),
            ("n", FieldType::Integer),
            ("s", FieldType::Boolean),
            ("b", FieldType::String),
        ]),
    );
    s
}

/// A schema that knows the series keys an earlier parse validated (its `new_keys`), as the
/// server's does for the next request, and no field types.
struct KnownKeys<'a>(HashMap<&'a [u8], u64>);

impl SchemaLookup for KnownKeys<'_> {
    fn field_type(&self, _measurement: &str, _field: &str) -> Option<FieldType> {
        None
    }

    fn known_series(&self, raw_key: &[u8], hash: KeyHash) -> Option<u64> {
        assert_eq!(
            hash,
            KeyHash::of(raw_key),
            "known_series got a hash that is not KeyHash::of the key"
        );
        self.0.get(raw_key).copied()
    }
}

// ---------------------------------------------------------------------------------------------
// Body invariants

/// How a body was decoded, for the checks that depend on it.
struct Ctx<'a> {
    what: &'static str,
    origin: Origin,
    /// The stored schema, if the decode had one.
    schema: Option<&'a HashMap<String, HashMap<String, FieldType>>>,
    /// Whether every row's series must be defined in its batch (no schema knew any series).
    all_series_defined: bool,
    /// The options of the decode (their limits must hold).
    opts: ParseOptions,
}

/// Whether row `i` of `col` holds the type's default value (what a null must hold).
fn holds_default(col: &FieldColumn, i: usize) -> bool {
    match &col.values {
        ColumnValues::Float(v) => v[i].to_bits() == 0,
        ColumnValues::Integer(v) => v[i] == 0,
        ColumnValues::UInteger(v) => v[i] == 0,
        ColumnValues::Boolean(v) => !v[i],
        ColumnValues::String(s) => s.get(i) == Some(""),
    }
}

/// Invariants of any decoded body (line protocol or msgpack).
fn check_body(out: &ParsedBody, ctx: &Ctx<'_>) {
    let what = ctx.what;
    let rows: usize = out.batches.iter().map(MeasurementBatch::len).sum();
    assert_eq!(out.points, rows, "{what}: points != sum of batch lengths");
    let opts = &ctx.opts;
    assert!(
        out.batches.len() <= opts.max_measurements,
        "{what}: {} measurements, limit {}",
        out.batches.len(),
        opts.max_measurements
    );
    let defined_series: usize = out.batches.iter().map(|b| b.series.len()).sum();
    assert!(
        defined_series <= opts.max_new_series,
        "{what}: {defined_series} new series, limit {}",
        opts.max_new_series
    );
    let mut names = HashSet::new();
    for b in &out.batches {
        let m = &b.measurement;
        assert!(!b.is_empty(), "{what}: empty batch {m:?}");
        assert!(!m.is_empty(), "{what}: empty measurement name");
        assert!(
            names::stored_name_problem(m).is_none(),
            "{what}: measurement {m:?} cannot be stored"
        );
        assert!(
            b.fields.len() <= opts.max_fields,
            "{what}: {m:?} has {} fields, limit {}",
            b.fields.len(),
            opts.max_fields
        );
        assert!(names.insert(m.as_str()), "{what}: two batches for {m:?}");
        if let Err(e) = b.validate() {
            panic!("{what}: batch {m:?} invalid: {e}");
        }
        let n = b.len();
        assert_eq!(b.series_id.len(), n, "{what}: {m:?} series_id length");
        assert_eq!(b.line.len(), n, "{what}: {m:?} line length");
        for (&t, &line) in b.time_ns.iter().zip(&b.line) {
            assert!(
                (MIN_TIME_NS..=MAX_TIME_NS).contains(&t),
                "{what}: {m:?} time {t} out of range"
            );
            assert!(line >= 1, "{what}: {m:?} line number 0");
        }
        assert!(
            b.line.windows(2).all(|w| w[0] <= w[1]),
            "{what}: {m:?} rows out of input order: {:?}",
            b.line
        );
        for col in &b.fields {
            let f = &col.name;
            assert_eq!(col.valid.len(), n, "{what}: {m:?}.{f:?} validity length");
            assert_eq!(col.values.len(), n, "{what}: {m:?}.{f:?} values length");
            assert!(!f.is_empty(), "{what}: {m:?} has an empty field name");
            assert!(
                names::stored_name_problem(f).is_none(),
                "{what}: {m:?} field {f:?} cannot be stored"
            );
            assert_ne!(f, "time", "{what}: {m:?} has a field named time");
            assert!(
                col.valid.iter().any(|v| *v),
                "{what}: {m:?}.{f:?} has no value at all"
            );
            for i in 0..n {
                if !col.valid[i] {
                    assert!(
                        holds_default(col, i),
                        "{what}: {m:?}.{f:?} null at row {i} holds a value"
                    );
                }
            }
            if let ColumnValues::Float(v) = &col.values {
                assert!(
                    v.iter().all(|x| x.is_finite()),
                    "{what}: {m:?}.{f:?} holds NaN or infinity"
                );
            }
            if let Some(ty) = ctx.schema.and_then(|s| s.get(m)).and_then(|s| s.get(f)) {
                assert_eq!(
                    col.field_type(),
                    *ty,
                    "{what}: {m:?}.{f:?} accepted against the stored type"
                );
            }
        }
        let defined: HashSet<u64> = b.series.iter().map(|s| s.id).collect();
        let used: HashSet<u64> = b.series_id.iter().copied().collect();
        for s in &b.series {
            check_series_def(what, m, s, opts.cluster_tag.as_deref());
            assert!(
                s.tags.len() <= opts.max_tags,
                "{what}: {m:?} series with {} tags, limit {}",
                s.tags.len(),
                opts.max_tags
            );
            assert!(
                used.contains(&s.id),
                "{what}: {m:?} defines series {:#x} that no row uses",
                s.id
            );
        }
        if ctx.all_series_defined {
            for id in &used {
                assert!(
                    defined.contains(id),
                    "{what}: {m:?} row of undefined series {id:#x}"
                );
            }
        }
    }
    // The first MAX_KEPT_ERRORS errors are kept, and the first schema error if it comes later.
    assert!(
        out.errors.len() <= MAX_KEPT_ERRORS
            || (out.errors.len() == MAX_KEPT_ERRORS + 1
                && out.errors[MAX_KEPT_ERRORS].kind.is_schema_error()
                && !out.errors[..MAX_KEPT_ERRORS]
                    .iter()
                    .any(|e| e.kind.is_schema_error())),
        "{what}: {} errors kept",
        out.errors.len()
    );
    assert!(
        out.rejected >= out.errors.len(),
        "{what}: {} rejected but {} errors",
        out.rejected,
        out.errors.len()
    );
    for e in &out.errors {
        assert_eq!(e.origin, ctx.origin, "{what}: error origin");
        assert!(e.line >= 1, "{what}: error at line/object 0");
        // `excerpt` keeps at most EXCERPT_MAX_BYTES of input; invalid UTF-8 in them is replaced
        // by U+FFFD (3 bytes for 1), so the string can be up to 3 times as long.
        assert!(
            e.excerpt.len() <= 3 * EXCERPT_MAX_BYTES,
            "{what}: error excerpt of {} bytes",
            e.excerpt.len()
        );
        // Rendering must not panic either.
        let _ = e.to_string();
    }
}

/// A series definition is sorted, unique, non-empty tags without `time`, and its id is the
/// canonical id of the measurement and tags.
fn check_series_def(what: &str, m: &str, s: &SeriesDef, cluster_tag: Option<&str>) {
    for (k, v) in &s.tags {
        assert!(!k.is_empty() && !v.is_empty(), "{what}: {m:?} empty tag");
        assert_ne!(k, "time", "{what}: {m:?} tag key time");
    }
    assert!(
        s.tags.windows(2).all(|w| w[0].0 < w[1].0),
        "{what}: {m:?} tags not sorted and unique: {:?}",
        s.tags
    );
    assert_eq!(
        s.id,
        s.expected_id(m, cluster_tag),
        "{what}: series id of {m:?} {:?} is not its canonical id (clustered by {cluster_tag:?})",
        s.tags
    );
}

/// Line-protocol specifics: physical line numbers, and the new-key positions.
fn check_lp_lines(what: &str, body: &[u8], out: &ParsedBody) {
    let physical = memchr_count(body) + 1;
    assert!(
        out.points + out.rejected + out.series_limited <= physical,
        "{what}: {} points, {} rejected and {} refused lines from {physical} lines",
        out.points,
        out.rejected,
        out.series_limited
    );
    let mut lines: Vec<usize> = out.errors.iter().map(|e| e.line).collect();
    assert!(
        lines.windows(2).all(|w| w[0] < w[1]),
        "{what}: error lines not increasing: {lines:?}"
    );
    for b in &out.batches {
        lines.extend(b.line.iter().map(|&l| l as usize));
    }
    let total = lines.len();
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), total, "{what}: two rows or errors on one line");
    if let Some(&last) = lines.last() {
        assert!(last <= physical, "{what}: line {last} of {physical}");
    }
    for k in &out.new_keys {
        let key = body
            .get(k.start..k.start.saturating_add(k.len))
            .unwrap_or_else(|| panic!("{what}: new key {k:?} outside the body"));
        assert_eq!(k.hash, KeyHash::of(key), "{what}: new key hash");
    }
}

fn memchr_count(body: &[u8]) -> usize {
    body.iter().filter(|&&b| b == b'\n').count()
}

/// The batches without their series definitions (for comparing parses that differ only in
/// which series a schema already knew).
fn without_series(out: &ParsedBody) -> Vec<MeasurementBatch> {
    out.batches
        .iter()
        .map(|b| MeasurementBatch {
            series: Vec::new(),
            ..b.clone()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Targets

/// `lp::parse` of `body`: see the module docs.
pub fn check_lp(body: &[u8]) {
    let schema = small_schema();
    let opts = ParseOptions::new(Precision::Nanosecond, NOW_NS);
    let (plain, peak) = measure(|| lp::parse(body, &opts, &NoSchema));
    check_alloc("lp::parse", body.len(), peak, parse_alloc_limit(body.len()));
    let ctx = Ctx {
        what: "lp::parse(NoSchema)",
        origin: Origin::Line,
        schema: None,
        all_series_defined: true,
        opts: opts.clone(),
    };
    check_body(&plain, &ctx);
    check_lp_lines(ctx.what, body, &plain);

    // The stored schema, with the options (precision, limits) picked by the length.
    let opts2 = options_for(body);
    let typed = lp::parse(body, &opts2, &schema);
    let ctx2 = Ctx {
        what: "lp::parse(schema, options_for)",
        origin: Origin::Line,
        schema: Some(&schema),
        all_series_defined: true,
        opts: opts2,
    };
    check_body(&typed, &ctx2);
    check_lp_lines(ctx2.what, body, &typed);

    // The next request with the same body: every key validated above is known.
    let known = KnownKeys(
        plain
            .new_keys
            .iter()
            .map(|k| (&body[k.start..k.start + k.len], k.id))
            .collect(),
    );
    let again = lp::parse(body, &opts, &known);
    let ctx3 = Ctx {
        what: "lp::parse(known series)",
        origin: Origin::Line,
        schema: None,
        all_series_defined: false,
        opts,
    };
    check_body(&again, &ctx3);
    check_lp_lines(ctx3.what, body, &again);
    assert_eq!(
        again.errors, plain.errors,
        "known series: errors differ from the first parse"
    );
    assert_eq!(again.points, plain.points, "known series: points differ");
    assert_eq!(
        again.rejected, plain.rejected,
        "known series: rejected differ"
    );
    assert_eq!(
        again.series_limited, plain.series_limited,
        "known series: series-limited lines differ"
    );
    assert!(
        again.new_keys.is_empty(),
        "known series: keys validated again: {:?}",
        again.new_keys
    );
    assert!(
        again.batches.iter().all(|b| b.series.is_empty()),
        "known series: a known series was defined again"
    );
    assert!(
        without_series(&again) == without_series(&plain),
        "known series: batches differ from the first parse"
    );

    for b in plain.batches.iter().chain(&typed.batches) {
        check_round_trip("lp batch", b);
    }

    check_lp_scalars(body);
}

/// What a field value or timestamp token should parse to, by a plain reference: the grammar
/// of the `lp` module docs checked byte by byte, and the standard library's conversions.
#[derive(Debug, PartialEq)]
enum Expect {
    Float(u64),
    Integer(i64),
    UInteger(u64),
    Boolean(bool),
    /// Rejected; `Some(kind name)` when the kind is certain.
    Rejected(Option<&'static str>),
}

fn all_digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

/// `-?(digits)?(.digits?)?([eE][+-]?digits)?` with at least one mantissa digit.
fn float_syntax(tok: &[u8]) -> bool {
    let t = tok.strip_prefix(b"-").unwrap_or(tok);
    let (mantissa, exp) = match t.iter().position(|&b| b == b'e' || b == b'E') {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, &b""[..]),
    };
    let digits_ok = |d: &[u8]| d.iter().all(u8::is_ascii_digit);
    let mantissa_ok = digits_ok(int) && digits_ok(frac) && !(int.is_empty() && frac.is_empty());
    let exp_ok =
        exp.is_none_or(|e| all_digits(e.strip_prefix(b"+").or(e.strip_prefix(b"-")).unwrap_or(e)));
    mantissa_ok && exp_ok
}

fn expect_field(tok: &[u8]) -> Expect {
    let rejected = |kind| Expect::Rejected(Some(kind));
    if let Some(digits) = tok.strip_suffix(b"i") {
        let d = digits.strip_prefix(b"-").unwrap_or(digits);
        if all_digits(d) {
            return std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .map_or(rejected("IntegerOutOfRange"), Expect::Integer);
        }
    }
    if let Some(digits) = tok.strip_suffix(b"u") {
        if all_digits(digits) {
            return std::str::from_utf8(digits)
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .map_or(rejected("IntegerOutOfRange"), Expect::UInteger);
        }
    }
    match tok {
        b"t" | b"T" | b"true" | b"True" | b"TRUE" => return Expect::Boolean(true),
        b"f" | b"F" | b"false" | b"False" | b"FALSE" => return Expect::Boolean(false),
        _ => {}
    }
    if matches!(tok.first(), Some(b't' | b'T' | b'f' | b'F')) {
        return rejected("InvalidBoolean");
    }
    if float_syntax(tok) {
        let v: f64 = std::str::from_utf8(tok)
            .expect("ASCII")
            .parse()
            .expect("the standard parser accepts the line-protocol float syntax");
        return if v.is_finite() {
            Expect::Float(v.to_bits())
        } else {
            rejected("NonFiniteFloat")
        };
    }
    Expect::Rejected(None)
}

fn kind_name(kind: &sluice_core::LineErrorKind) -> String {
    let debug = format!("{kind:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Differential checks of the number, boolean and timestamp scanners: the input's first token
/// (up to a separator, at most 64 bytes) as a field value, `m v=TOKEN`, and as a timestamp in
/// every precision, `m v=1 TOKEN`, against [`expect_field`] and `i64::from_str`.
fn check_lp_scalars(body: &[u8]) {
    let end = body
        .iter()
        .take(64)
        .position(|b| matches!(b, b',' | b' ' | b'\t' | b'\r' | b'\n'))
        .unwrap_or(body.len().min(64));
    let tok = &body[..end];
    if tok.first() == Some(&b'"') {
        return; // a string: its own scanner, checked through the batches
    }
    let opts = ParseOptions::new(Precision::Nanosecond, NOW_NS);
    let line = [&b"m v="[..], tok].concat();
    let out = lp::parse(&line, &opts, &NoSchema);
    let got = match (out.batches.first(), out.errors.first()) {
        (Some(b), None) => match &b.fields[0].values {
            ColumnValues::Float(v) => Expect::Float(v[0].to_bits()),
            ColumnValues::Integer(v) => Expect::Integer(v[0]),
            ColumnValues::UInteger(v) => Expect::UInteger(v[0]),
            ColumnValues::Boolean(v) => Expect::Boolean(v[0]),
            ColumnValues::String(_) => panic!("{line:?}: a string from an unquoted value"),
        },
        (None, Some(e)) => Expect::Rejected(Some(match kind_name(&e.kind).as_str() {
            "IntegerOutOfRange" => "IntegerOutOfRange",
            "NonFiniteFloat" => "NonFiniteFloat",
            "InvalidBoolean" => "InvalidBoolean",
            _ => "other",
        })),
        _ => panic!(
            "{line:?}: one line, {} points, {} errors",
            out.points,
            out.errors.len()
        ),
    };
    let want = expect_field(tok);
    let agrees = match (&want, &got) {
        (Expect::Rejected(None), Expect::Rejected(_)) => true,
        (Expect::Rejected(Some(w)), Expect::Rejected(Some(g))) => w == g,
        (w, g) => w == g,
    };
    assert!(
        agrees,
        "field value {:?}: parsed as {got:?}, expected {want:?}",
        String::from_utf8_lossy(tok)
    );

    let line = [&b"m v=1 "[..], tok].concat();
    for precision in PRECISIONS {
        let out = lp::parse(&line, &ParseOptions::new(precision, NOW_NS), &NoSchema);
        // Err(Some(out of range?)), or Err(None) for a token that is not a number, which may
        // be reported either way (digits that overflow before a stray byte say "out of range").
        let want: Result<i64, Option<bool>> = {
            let d = tok.strip_prefix(b"-").unwrap_or(tok);
            if tok.is_empty() {
                Ok(precision.truncate_ns(NOW_NS))
            } else if !all_digits(d) {
                Err(None)
            } else {
                std::str::from_utf8(tok)
                    .expect("ASCII")
                    .parse::<i64>()
                    .ok()
                    .and_then(|v| v.checked_mul(precision.multiplier_ns()))
                    .filter(|ns| (MIN_TIME_NS..=MAX_TIME_NS).contains(ns))
                    .ok_or(Some(true))
            }
        };
        let got: Result<i64, Option<bool>> = match (out.batches.first(), out.errors.first()) {
            (Some(b), None) => Ok(b.time_ns[0]),
            (None, Some(e)) => Err(Some(kind_name(&e.kind) == "TimestampOutOfRange")),
            _ => panic!(
                "{line:?}: one line, {} points, {} errors",
                out.points,
                out.errors.len()
            ),
        };
        assert!(
            got == want || (want == Err(None) && got.is_err()),
            "timestamp {:?} in {precision}: got {got:?}, expected {want:?} (Ok(ns), or Err(out of range?))",
            String::from_utf8_lossy(tok)
        );
    }
}

/// `msgpack::decode` of `body`: see the module docs.
pub fn check_msgpack(body: &[u8]) {
    let schema = small_schema();
    let opts = ParseOptions::new(Precision::Nanosecond, NOW_NS);
    let (plain, peak) = measure(|| msgpack::decode(body, &opts, &NoSchema));
    check_alloc(
        "msgpack::decode",
        body.len(),
        peak,
        parse_alloc_limit(body.len()),
    );
    check_body(
        &plain,
        &Ctx {
            what: "msgpack::decode(NoSchema)",
            origin: Origin::Object,
            schema: None,
            all_series_defined: true,
            opts,
        },
    );
    check_msgpack_objects("msgpack::decode(NoSchema)", body, &plain);
    let opts2 = options_for(body);
    let typed = msgpack::decode(body, &opts2, &schema);
    check_body(
        &typed,
        &Ctx {
            what: "msgpack::decode(schema, options_for)",
            origin: Origin::Object,
            schema: Some(&schema),
            all_series_defined: true,
            opts: opts2,
        },
    );
    check_msgpack_objects("msgpack::decode(schema, options_for)", body, &typed);
    assert!(plain.new_keys.is_empty() && typed.new_keys.is_empty());
    for b in plain.batches.iter().chain(&typed.batches) {
        check_round_trip("msgpack batch", b);
    }
}

/// Every object takes at least one byte, and errors come in object order, at most one per
/// object except a last one for bytes that are not msgpack.
fn check_msgpack_objects(what: &str, body: &[u8], out: &ParsedBody) {
    let objects = body.len().max(1);
    let lines: Vec<usize> = out.errors.iter().map(|e| e.line).collect();
    assert!(
        lines.windows(2).all(|w| w[0] <= w[1]),
        "{what}: error objects out of order: {lines:?}"
    );
    assert!(
        lines.windows(3).all(|w| w[0] < w[2]),
        "{what}: more than two errors for one object: {lines:?}"
    );
    for l in lines.iter().copied().chain(
        out.batches
            .iter()
            .flat_map(|b| b.line.iter().map(|&l| l as usize)),
    ) {
        assert!(
            l <= objects,
            "{what}: object {l} of a {}-byte body",
            body.len()
        );
    }
}

/// `codec::decode` of `data`: see the module docs.
pub fn check_codec(data: &[u8]) {
    // As they are: almost always a checksum error, but must never panic.
    decode_checked("codec::decode(raw)", data);
    // Sealed: the first byte is the version (mapped into 1..=FORMAT_VERSION), the rest the
    // payload, and a valid checksum follows, so the structural decoder sees arbitrary payloads.
    // An entry without its last 8 bytes decodes this way.
    if let Some((&v, payload)) = data.split_first() {
        let version = if (1..=codec::FORMAT_VERSION).contains(&v) {
            v
        } else {
            1 + v % codec::FORMAT_VERSION
        };
        let sealed = seal(version, payload);
        decode_checked("codec::decode(sealed)", &sealed);
    }
    // A batch built from the bytes (any float bits, runs of times, repeated series, nulls).
    let built = batch_from_bytes(data);
    assert!(built.validate().is_ok(), "built an invalid batch");
    check_round_trip("built batch", &built);
    // Whatever line protocol the bytes hold.
    let out = lp::parse(
        data,
        &ParseOptions::new(Precision::Nanosecond, NOW_NS),
        &NoSchema,
    );
    for b in &out.batches {
        check_round_trip("lp batch", b);
    }
}

/// `version`, `payload` and the XXH3-64 of both: an entry whose checksum holds.
pub fn seal(version: u8, payload: &[u8]) -> Vec<u8> {
    let mut sealed = Vec::with_capacity(payload.len() + 9);
    sealed.push(version);
    sealed.extend_from_slice(payload);
    let sum = xxhash_rust::xxh3::xxh3_64(&sealed);
    sealed.extend_from_slice(&sum.to_le_bytes());
    sealed
}

/// Decodes `bytes`, bounding what it allocates; a batch it returns is valid and survives
/// another encode/decode unchanged.
fn decode_checked(what: &str, bytes: &[u8]) {
    let (res, peak) = measure(|| codec::decode(bytes));
    check_alloc(what, bytes.len(), peak, codec_alloc_limit(bytes.len()));
    if let Ok(b) = res {
        if let Err(e) = b.validate() {
            panic!("{what}: decoded an invalid batch: {e}");
        }
        assert!(
            b.line.len() == b.len() || b.line.is_empty(),
            "{what}: line numbers"
        );
        check_round_trip(what, &b);
    }
}

fn check_alloc(what: &str, len: usize, peak: usize, limit: usize) {
    assert!(
        peak <= limit,
        "{what}: allocated {peak} bytes at once for {len} input bytes (limit {limit})"
    );
}

/// What the log keeps of a batch: everything but line numbers and series definitions.
pub fn durable(b: &MeasurementBatch) -> MeasurementBatch {
    MeasurementBatch {
        line: Vec::new(),
        series: Vec::new(),
        ..b.clone()
    }
}

/// `encode` then `decode` gives back the durable part of `b`, floats bit for bit.
pub fn check_round_trip(what: &str, b: &MeasurementBatch) {
    let mut enc = Vec::new();
    codec::encode(b, &mut enc);
    let back = match codec::decode(&enc) {
        Ok(back) => back,
        Err(e) => panic!(
            "{what}: encoded batch {:?} does not decode: {e}",
            b.measurement
        ),
    };
    let want = durable(b);
    assert!(
        same_bits(&back, &want),
        "{what}: round trip changed the batch\n  before: {want:?}\n  after:  {back:?}"
    );
}

/// Equality with floats compared by their bits (so -0.0 != 0.0 and NaN == the same NaN).
pub fn same_bits(a: &MeasurementBatch, b: &MeasurementBatch) -> bool {
    let floats_eq = |x: &ColumnValues, y: &ColumnValues| match (x, y) {
        (ColumnValues::Float(x), ColumnValues::Float(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => x == y,
    };
    a.measurement == b.measurement
        && a.time_ns == b.time_ns
        && a.series_id == b.series_id
        && a.line == b.line
        && a.series == b.series
        && a.fields.len() == b.fields.len()
        && a.fields
            .iter()
            .zip(&b.fields)
            .all(|(c, d)| c.name == d.name && c.valid == d.valid && floats_eq(&c.values, &d.values))
}

// ---------------------------------------------------------------------------------------------
// Batches from bytes

/// Reads the fuzz input as a stream of choices; zeros once it runs out.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        for x in &mut a {
            *x = self.u8();
        }
        u64::from_le_bytes(a)
    }

    fn small_i64(&mut self) -> i64 {
        match self.u8() % 4 {
            0 => i64::from(self.u8() as i8),
            1 => i64::from(i16::from_le_bytes([self.u8(), self.u8()])),
            2 => i64::from(i32::from_le_bytes([
                self.u8(),
                self.u8(),
                self.u8(),
                self.u8(),
            ])),
            _ => self.u64() as i64,
        }
    }

    fn float(&mut self) -> f64 {
        const SPECIAL: [f64; 12] = [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_993.0,
            5e-324,
        ];
        match self.u8() % 4 {
            0 => f64::from_bits(self.u64()),
            1 => SPECIAL[usize::from(self.u8()) % SPECIAL.len()],
            // A decimal with up to 12 digits after the point (the codec tries up to 9).
            _ => {
                let m = self.small_i64();
                let e = i32::from(self.u8() % 13);
                m as f64 / 10f64.powi(e)
            }
        }
    }
}

/// A valid batch of up to 40 rows described by `data`.
pub fn batch_from_bytes(data: &[u8]) -> MeasurementBatch {
    let mut c = Choices(data);
    let rows = usize::from(c.u8() % 41);
    let mut b = MeasurementBatch::new(String::from_utf8_lossy(&[c.u8()]).into_owned());
    let mut ids: Vec<u64> = Vec::new();
    for i in 0..rows {
        let t = match (i, c.u8() % 4) {
            (0, _) | (_, 0) => c.u64() as i64,
            (_, 1) => b.time_ns[i - 1].wrapping_add(c.small_i64()),
            _ => b.time_ns[i - 1],
        };
        b.time_ns.push(t);
        let pick = usize::from(c.u8());
        let id = match ids.get(pick % 8) {
            Some(&id) if pick % 8 < ids.len() && pick >= 8 => id,
            _ => {
                let id = c.u64();
                if !ids.contains(&id) {
                    ids.push(id);
                }
                id
            }
        };
        b.series_id.push(id);
        b.line.push(i as u32 + 1);
    }
    b.series = ids
        .iter()
        .filter(|id| b.series_id.contains(id))
        .map(|&id| SeriesDef {
            id,
            tags: Vec::new(),
        })
        .collect();
    let fields = c.u8() % 7;
    for f in 0..fields {
        let ty = [
            FieldType::Float,
            FieldType::Integer,
            FieldType::UInteger,
            FieldType::String,
            FieldType::Boolean,
        ][usize::from(c.u8() % 5)];
        let mut col = FieldColumn::new(format!("f{f}"), ty);
        let mut strings = StringColumn::new();
        for _ in 0..rows {
            let valid = c.u8() % 8 != 0;
            col.valid.push(valid);
            match &mut col.values {
                ColumnValues::Float(v) => v.push(if valid { c.float() } else { 0.0 }),
                ColumnValues::Integer(v) => v.push(if valid { c.small_i64() } else { 0 }),
                ColumnValues::UInteger(v) => v.push(if valid { c.small_i64() as u64 } else { 0 }),
                ColumnValues::Boolean(v) => v.push(valid && c.u8() % 2 == 1),
                ColumnValues::String(_) => {
                    let s = if valid {
                        let len = usize::from(c.u8() % 8);
                        let bytes: Vec<u8> = (0..len).map(|_| c.u8()).collect();
                        String::from_utf8_lossy(&bytes).into_owned()
                    } else {
                        String::new()
                    };
                    strings.try_push(&s).expect("small strings fit");
                }
            }
        }
        if ty == FieldType::String {
            col.values = ColumnValues::String(strings);
        }
        b.fields.push(col);
    }
    b
}
