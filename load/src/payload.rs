//! Request bodies, encoded once before the run so the generator's cost per request is a
//! memcpy-sized patch, never encoding.
//!
//! Points are numbered globally: point `g` belongs to series `g mod S` and carries round
//! `g div S`, timestamp `t0 + round * step`. Every (series, timestamp) pair is therefore
//! distinct for the whole run, which matters: duplicates would be deduplicated or stored twice
//! depending on the target, and either distorts what is measured. A request of N points is
//! one of T *templates* (T = S / gcd(N, S), the period after which the series pattern
//! repeats, capped so memory stays bounded) and only its timestamps differ between uses.
//! Timestamps are therefore written at a fixed width (decimal digits for line protocol, an
//! 8-byte big-endian int64 for msgpack) and patched in place: request `seq` uses template
//! `seq mod T` with every timestamp shifted by `(seq div T) * rounds_per_cycle * step`.

use crate::error::{Error, Result};

/// Body encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// InfluxDB line protocol.
    LineProtocol,
    /// Columnar msgpack: an array of `{measurement, tags, timestamps, fields}` objects, one per
    /// series present in the request.
    Msgpack,
}

impl Format {
    /// The request's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::LineProtocol => "text/plain; charset=utf-8",
            Format::Msgpack => "application/msgpack",
        }
    }
}

/// Timestamp precision, as the `precision` query parameter spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl Precision {
    /// The query-string spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Ns => "ns",
            Precision::Us => "us",
            Precision::Ms => "ms",
            Precision::S => "s",
        }
    }

    /// Parses `ns`, `n`, `us`, `u`, `ms`, `s`.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "ns" | "n" => Ok(Precision::Ns),
            "us" | "u" => Ok(Precision::Us),
            "ms" => Ok(Precision::Ms),
            "s" => Ok(Precision::S),
            _ => Err(crate::error::invalid(
                "precision",
                text,
                "expected ns, us, ms or s",
            )),
        }
    }

    /// Now, in this precision (the first round's timestamp).
    pub fn now(self) -> u64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        match self {
            Precision::Ns => d.as_nanos() as u64,
            Precision::Us => d.as_micros() as u64,
            Precision::Ms => d.as_millis() as u64,
            Precision::S => d.as_secs(),
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct PayloadSpec {
    /// Body encoding.
    pub format: Format,
    /// Points per request (N).
    pub points: usize,
    /// Distinct series (S): tag sets `host=host-<i>,region=r<i mod 16>`.
    pub series: usize,
    /// Float fields per point (`f0`, `f1`, ...).
    pub fields: usize,
    /// Measurement name.
    pub measurement: String,
    /// First timestamp, in the request precision.
    pub t0: u64,
    /// Timestamp distance between rounds, in the request precision.
    pub step: u64,
    /// Upper bound on points held in templates (memory guard).
    pub max_template_points: usize,
}

impl PayloadSpec {
    /// Defaults for everything but the shape.
    pub fn new(format: Format, points: usize, series: usize, fields: usize) -> Self {
        Self {
            format,
            points,
            series,
            fields,
            measurement: "cpu".into(),
            t0: 1_700_000_000_000_000_000,
            step: 1,
            max_template_points: 4_000_000,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stamp {
    /// ASCII decimal of exactly this many digits.
    Decimal(usize),
    /// msgpack int64: marker 0xd3 then 8 bytes big-endian (the offset is of the 8 bytes).
    BigEndian64,
}

/// One pre-encoded body and where its timestamps are.
#[derive(Clone, Debug)]
pub struct Template {
    /// The encoded body with timestamps of cycle 0.
    pub body: Vec<u8>,
    /// Per local round, the byte offsets of its timestamps in `body`.
    rounds: Vec<(u64, Vec<u32>)>,
}

/// All templates of a run and the rule to turn a request number into its bytes.
#[derive(Clone, Debug)]
pub struct Payloads {
    templates: Vec<Template>,
    stamp: Stamp,
    rounds_per_cycle: u64,
    t0: u64,
    step: u64,
    points: usize,
    series: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn digits(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// A deterministic, cheap, well-spread value in 0.00..999.99 for point `g`, field `f`.
fn value(g: u64, f: usize) -> u64 {
    let mut x =
        g.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (f as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    x % 100_000
}

fn escape_measurement(name: &str, out: &mut Vec<u8>) {
    for b in name.bytes() {
        if b == b',' || b == b' ' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
}

fn push_decimal(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(v.to_string().as_bytes());
}

/// Writes `v` as exactly `dst.len()` ASCII digits; false if it does not fit.
fn write_fixed_decimal(mut v: u64, dst: &mut [u8]) -> bool {
    for d in dst.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    v == 0
}

mod mp {
    //! The few msgpack encodings the generator needs, written out so the byte layout (and
    //! where each timestamp sits) is explicit.
    pub fn array_len(out: &mut Vec<u8>, n: usize) {
        if n < 16 {
            out.push(0x90 | n as u8);
        } else if n <= u16::MAX as usize {
            out.push(0xdc);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xdd);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }
    pub fn map_len(out: &mut Vec<u8>, n: usize) {
        if n < 16 {
            out.push(0x80 | n as u8);
        } else if n <= u16::MAX as usize {
            out.push(0xde);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xdf);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }
    pub fn str(out: &mut Vec<u8>, s: &str) {
        let n = s.len();
        if n < 32 {
            out.push(0xa0 | n as u8);
        } else if n <= u8::MAX as usize {
            out.push(0xd9);
            out.push(n as u8);
        } else if n <= u16::MAX as usize {
            out.push(0xda);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xdb);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        out.extend_from_slice(s.as_bytes());
    }
    pub fn f64(out: &mut Vec<u8>, v: f64) {
        out.push(0xcb);
        out.extend_from_slice(&v.to_be_bytes());
    }
    /// Returns the offset of the 8 value bytes (for patching).
    pub fn i64_fixed(out: &mut Vec<u8>, v: i64) -> usize {
        out.push(0xd3);
        let at = out.len();
        out.extend_from_slice(&v.to_be_bytes());
        at
    }
}

impl Payloads {
    /// Encodes every template.
    pub fn build(spec: &PayloadSpec) -> Result<Self> {
        let (n, s) = (spec.points, spec.series);
        if n == 0 || s == 0 || spec.fields == 0 {
            return Err(Error::Payload(
                "points, series and fields must all be at least 1".into(),
            ));
        }
        if spec.step == 0 {
            return Err(Error::Payload("timestamp step must be at least 1".into()));
        }
        if spec.measurement.is_empty() {
            return Err(Error::Payload("measurement name is empty".into()));
        }
        let period = s / gcd(n, s);
        // Exact period when it fits; otherwise just enough templates to name every series
        // once (coverage then is uneven by at most one request, uniqueness still holds).
        let count = if period.saturating_mul(n) <= spec.max_template_points {
            period
        } else {
            s.div_ceil(n)
        };
        if count.saturating_mul(n) > spec.max_template_points.max(n) {
            return Err(Error::Payload(format!(
                "{s} series with {n} points per request needs {count} distinct requests, over the \
                 {} points held in memory; use fewer series or more points per request",
                spec.max_template_points
            )));
        }
        let rounds_per_cycle = ((count * n).div_ceil(s)) as u64;
        let stamp = stamp_of(spec);
        if spec.format == Format::Msgpack && spec.t0 > i64::MAX as u64 / 2 {
            return Err(Error::Payload("t0 too large for an int64 timestamp".into()));
        }
        let templates = (0..count)
            .map(|j| match spec.format {
                Format::LineProtocol => encode_lp(spec, j),
                Format::Msgpack => encode_msgpack(spec, j),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            templates,
            stamp,
            rounds_per_cycle,
            t0: spec.t0,
            step: spec.step,
            points: n,
            series: s,
        })
    }

    /// The templates.
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// Points per request.
    pub fn points_per_request(&self) -> usize {
        self.points
    }

    /// Distinct series.
    pub fn series(&self) -> usize {
        self.series
    }

    /// Which template request `seq` uses, and its cycle.
    pub fn locate(&self, seq: u64) -> (usize, u64) {
        let t = self.templates.len() as u64;
        ((seq % t) as usize, seq / t)
    }

    /// Rewrites, in `buf[base..]` holding template `j`'s body, every timestamp for cycle
    /// `cycle`. Costs one formatting per distinct round and one short copy per point.
    pub fn patch(&self, j: usize, cycle: u64, buf: &mut [u8], base: usize) -> Result<()> {
        let template = self
            .templates
            .get(j)
            .ok_or_else(|| Error::Payload(format!("no template {j}")))?;
        let shift = cycle
            .checked_mul(self.rounds_per_cycle)
            .ok_or_else(|| Error::Payload("timestamp overflow".into()))?;
        write_stamps(
            &template.rounds,
            self.stamp,
            self.t0,
            self.step,
            shift,
            buf,
            base,
        )
    }

    /// The body of request `seq`, freshly allocated (for pre-compressed pools and tests).
    pub fn body(&self, seq: u64) -> Result<Vec<u8>> {
        let (j, cycle) = self.locate(seq);
        let mut buf = self
            .templates
            .get(j)
            .map(|t| t.body.clone())
            .unwrap_or_default();
        self.patch(j, cycle, &mut buf, 0)?;
        Ok(buf)
    }
}

fn series_tags(series: usize) -> (String, String) {
    (format!("host-{series}"), format!("r{}", series % 16))
}

fn encode_lp(spec: &PayloadSpec, j: usize) -> Result<Template> {
    let (n, s) = (spec.points, spec.series);
    let width = digits(spec.t0);
    let mut body = Vec::with_capacity(n * (48 + spec.fields * 10 + width));
    let mut rounds: Vec<(u64, Vec<u32>)> = Vec::new();
    let mut line_prefix = Vec::new();
    for i in 0..n {
        let g = (j * n + i) as u64;
        let series = (g % s as u64) as usize;
        let round = g / s as u64;
        let (host, region) = series_tags(series);
        line_prefix.clear();
        escape_measurement(&spec.measurement, &mut line_prefix);
        body.extend_from_slice(&line_prefix);
        body.extend_from_slice(b",host=");
        body.extend_from_slice(host.as_bytes());
        body.extend_from_slice(b",region=");
        body.extend_from_slice(region.as_bytes());
        for f in 0..spec.fields {
            body.push(if f == 0 { b' ' } else { b',' });
            body.push(b'f');
            push_decimal(&mut body, f as u64);
            body.push(b'=');
            let v = value(g, f);
            push_decimal(&mut body, v / 100);
            body.push(b'.');
            body.push(b'0' + (v / 10 % 10) as u8);
            body.push(b'0' + (v % 10) as u8);
        }
        body.push(b' ');
        let at = body.len() as u32;
        body.extend(std::iter::repeat_n(b'0', width));
        body.push(b'\n');
        push_offset(&mut rounds, round, at);
    }
    finish(spec, body, rounds)
}

fn encode_msgpack(spec: &PayloadSpec, j: usize) -> Result<Template> {
    let (n, s) = (spec.points, spec.series);
    // Group this request's points by series, in order of first appearance.
    let mut order: Vec<usize> = Vec::new();
    let mut members: std::collections::HashMap<usize, Vec<u64>> = Default::default();
    for i in 0..n {
        let g = (j * n + i) as u64;
        let series = (g % s as u64) as usize;
        members
            .entry(series)
            .or_insert_with(|| {
                order.push(series);
                Vec::new()
            })
            .push(g);
    }
    let mut body = Vec::with_capacity(n * (9 + 9 * spec.fields) + order.len() * 80);
    let mut rounds: Vec<(u64, Vec<u32>)> = Vec::new();
    let field_names: Vec<String> = (0..spec.fields).map(|f| format!("f{f}")).collect();
    mp::array_len(&mut body, order.len());
    for series in order {
        let points = &members[&series];
        let (host, region) = series_tags(series);
        mp::map_len(&mut body, 4);
        mp::str(&mut body, "measurement");
        mp::str(&mut body, &spec.measurement);
        mp::str(&mut body, "tags");
        mp::map_len(&mut body, 2);
        mp::str(&mut body, "host");
        mp::str(&mut body, &host);
        mp::str(&mut body, "region");
        mp::str(&mut body, &region);
        mp::str(&mut body, "timestamps");
        mp::array_len(&mut body, points.len());
        for &g in points {
            let at = mp::i64_fixed(&mut body, 0);
            push_offset(&mut rounds, g / s as u64, at as u32);
        }
        mp::str(&mut body, "fields");
        mp::map_len(&mut body, spec.fields);
        for (f, name) in field_names.iter().enumerate() {
            mp::str(&mut body, name);
            mp::array_len(&mut body, points.len());
            for &g in points {
                mp::f64(&mut body, value(g, f) as f64 / 100.0);
            }
        }
    }
    finish(spec, body, rounds)
}

fn push_offset(rounds: &mut Vec<(u64, Vec<u32>)>, round: u64, at: u32) {
    match rounds.iter_mut().find(|(r, _)| *r == round) {
        Some((_, v)) => v.push(at),
        None => rounds.push((round, vec![at])),
    }
}

/// Writes every timestamp of `rounds` into `buf[base..]`, for cycle offset `shift` (in
/// rounds). One formatting per distinct round, then one short copy per point.
fn write_stamps(
    rounds: &[(u64, Vec<u32>)],
    stamp: Stamp,
    t0: u64,
    step: u64,
    shift: u64,
    buf: &mut [u8],
    base: usize,
) -> Result<()> {
    let overflow = || Error::Payload("timestamp overflow".into());
    for (round, offsets) in rounds {
        let ts = shift
            .checked_add(*round)
            .and_then(|r| r.checked_mul(step))
            .and_then(|d| d.checked_add(t0))
            .ok_or_else(overflow)?;
        match stamp {
            Stamp::Decimal(width) => {
                let mut digits = [0u8; 20];
                let digits = &mut digits[..width];
                if !write_fixed_decimal(ts, digits) {
                    return Err(Error::Payload(format!(
                        "timestamp {ts} outgrew its {width} digits"
                    )));
                }
                for &o in offsets {
                    let at = base + o as usize;
                    buf[at..at + width].copy_from_slice(digits);
                }
            }
            Stamp::BigEndian64 => {
                let v = i64::try_from(ts).map_err(|_| overflow())?.to_be_bytes();
                for &o in offsets {
                    let at = base + o as usize;
                    buf[at..at + 8].copy_from_slice(&v);
                }
            }
        }
    }
    Ok(())
}

fn stamp_of(spec: &PayloadSpec) -> Stamp {
    match spec.format {
        Format::LineProtocol => Stamp::Decimal(digits(spec.t0)),
        Format::Msgpack => Stamp::BigEndian64,
    }
}

/// Fills in cycle 0's timestamps with the same code that patches later cycles.
fn finish(spec: &PayloadSpec, mut body: Vec<u8>, rounds: Vec<(u64, Vec<u32>)>) -> Result<Template> {
    write_stamps(&rounds, stamp_of(spec), spec.t0, spec.step, 0, &mut body, 0)?;
    Ok(Template { body, rounds })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// (series key, timestamp, field values) of every LP line.
    fn parse_lp(body: &[u8]) -> Vec<(String, u64, Vec<f64>)> {
        let text = std::str::from_utf8(body).unwrap_or("");
        assert!(text.ends_with('\n'));
        text.lines()
            .map(|line| {
                let parts: Vec<&str> = line.split(' ').collect();
                assert_eq!(parts.len(), 3, "{line}");
                let fields = parts[1]
                    .split(',')
                    .map(|kv| kv.split_once('=').map(|(_, v)| v).unwrap_or(""))
                    .map(|v| v.parse::<f64>().unwrap_or(f64::NAN))
                    .collect();
                (parts[0].to_string(), parts[2].parse().unwrap_or(0), fields)
            })
            .collect()
    }

    #[test]
    fn line_protocol_shape_and_cardinality() {
        let spec = PayloadSpec::new(Format::LineProtocol, 50, 20, 5);
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        // gcd(50, 20) = 10: the series pattern repeats every 2 requests.
        assert_eq!(p.templates().len(), 2);
        let mut seen = HashSet::new();
        let mut series = HashSet::new();
        for seq in 0..10 {
            let lines = parse_lp(&p.body(seq).unwrap_or_default());
            assert_eq!(lines.len(), 50);
            for (key, ts, fields) in lines {
                assert!(key.starts_with("cpu,host=host-"), "{key}");
                assert_eq!(fields.len(), 5);
                assert!(fields.iter().all(|v| (0.0..1000.0).contains(v)));
                assert!(seen.insert((key.clone(), ts)), "duplicate point {key} {ts}");
                series.insert(key);
            }
        }
        assert_eq!(series.len(), 20);
        // Timestamps advance from t0 in steps of one.
        let min = seen.iter().map(|(_, t)| *t).min();
        assert_eq!(min, Some(spec.t0));
    }

    #[test]
    fn more_series_than_points_covers_all_series() {
        let spec = PayloadSpec::new(Format::LineProtocol, 100, 1000, 1);
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.templates().len(), 10);
        let mut series = HashSet::new();
        let mut points = HashSet::new();
        for seq in 0..30 {
            for (key, ts, _) in parse_lp(&p.body(seq).unwrap_or_default()) {
                assert!(points.insert((key.clone(), ts)));
                series.insert(key);
            }
        }
        assert_eq!(series.len(), 1000);
        // Bounded templates when the exact period is too large: still every series, still
        // no duplicate.
        let mut spec = PayloadSpec::new(Format::LineProtocol, 7, 1009, 1);
        spec.max_template_points = 2000;
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.templates().len(), 145);
        let mut series = HashSet::new();
        let mut points = HashSet::new();
        for seq in 0..400 {
            for (key, ts, _) in parse_lp(&p.body(seq).unwrap_or_default()) {
                assert!(points.insert((key.clone(), ts)), "{key} {ts}");
                series.insert(key);
            }
        }
        assert_eq!(series.len(), 1009);
    }

    #[test]
    fn patching_keeps_length_and_shifts_time() {
        let spec = PayloadSpec::new(Format::LineProtocol, 1000, 100, 2);
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        let a = p.body(0).unwrap_or_default();
        let b = p.body(7).unwrap_or_default();
        assert_eq!(a.len(), b.len());
        let ta: Vec<u64> = parse_lp(&a).into_iter().map(|l| l.1).collect();
        let tb: Vec<u64> = parse_lp(&b).into_iter().map(|l| l.1).collect();
        // 1000 points over 100 series: 10 rounds per request.
        assert!(ta.iter().zip(&tb).all(|(x, y)| y - x == 70));
        // A digit overflow is an error, not a corrupt body.
        let mut spec = PayloadSpec::new(Format::LineProtocol, 10, 10, 1);
        spec.t0 = 99;
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.body(0).is_ok());
        assert!(p.body(1).is_err());
    }

    #[test]
    fn measurement_is_escaped() {
        let mut spec = PayloadSpec::new(Format::LineProtocol, 1, 1, 1);
        spec.measurement = "my cpu,x".into();
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        let body = String::from_utf8(p.body(0).unwrap_or_default()).unwrap_or_default();
        assert!(
            body.starts_with("my\\ cpu\\,x,host=host-0,region=r0 f0="),
            "{body}"
        );
    }

    #[test]
    fn rejects_impossible_shapes() {
        assert!(Payloads::build(&PayloadSpec::new(Format::LineProtocol, 0, 1, 1)).is_err());
        assert!(Payloads::build(&PayloadSpec::new(Format::Msgpack, 1, 0, 1)).is_err());
        let mut spec = PayloadSpec::new(Format::LineProtocol, 1, 10_000, 1);
        spec.max_template_points = 100;
        assert!(Payloads::build(&spec).is_err());
    }

    /// Decodes a msgpack body with `rmp` (an independent implementation) into
    /// (measurement, tags, timestamps, fields).
    type Obj = (
        String,
        Vec<(String, String)>,
        Vec<i64>,
        Vec<(String, Vec<f64>)>,
    );

    fn read_str(r: &mut &[u8]) -> String {
        let n = rmp::decode::read_str_len(r).unwrap_or_else(|e| panic!("{e:?}")) as usize;
        let (s, rest) = r.split_at(n);
        *r = rest;
        String::from_utf8(s.to_vec()).unwrap_or_default()
    }

    fn decode_msgpack(body: &[u8]) -> Vec<Obj> {
        let mut r = body;
        let n = rmp::decode::read_array_len(&mut r).unwrap_or_else(|e| panic!("{e:?}"));
        let mut out = Vec::new();
        for _ in 0..n {
            let keys = rmp::decode::read_map_len(&mut r).unwrap_or(0);
            assert_eq!(keys, 4);
            let mut obj: Obj = Default::default();
            for _ in 0..keys {
                match read_str(&mut r).as_str() {
                    "measurement" => obj.0 = read_str(&mut r),
                    "tags" => {
                        for _ in 0..rmp::decode::read_map_len(&mut r).unwrap_or(0) {
                            let k = read_str(&mut r);
                            obj.1.push((k, read_str(&mut r)));
                        }
                    }
                    "timestamps" => {
                        for _ in 0..rmp::decode::read_array_len(&mut r).unwrap_or(0) {
                            obj.2.push(rmp::decode::read_int(&mut r).unwrap_or(-1));
                        }
                    }
                    "fields" => {
                        for _ in 0..rmp::decode::read_map_len(&mut r).unwrap_or(0) {
                            let name = read_str(&mut r);
                            let len = rmp::decode::read_array_len(&mut r).unwrap_or(0);
                            let vals = (0..len)
                                .map(|_| rmp::decode::read_f64(&mut r).unwrap_or(f64::NAN))
                                .collect();
                            obj.3.push((name, vals));
                        }
                    }
                    other => panic!("unexpected key {other}"),
                }
            }
            out.push(obj);
        }
        assert!(r.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn msgpack_columnar_shape_and_cardinality() {
        let spec = PayloadSpec::new(Format::Msgpack, 60, 25, 3);
        let p = Payloads::build(&spec).unwrap_or_else(|e| panic!("{e}"));
        let mut seen = HashSet::new();
        let mut per_series: HashMap<String, usize> = HashMap::new();
        for seq in 0..10 {
            let objs = decode_msgpack(&p.body(seq).unwrap_or_default());
            let total: usize = objs.iter().map(|o| o.2.len()).sum();
            assert_eq!(total, 60);
            for (m, tags, ts, fields) in objs {
                assert_eq!(m, "cpu");
                assert_eq!(tags.len(), 2);
                assert_eq!(fields.len(), 3);
                assert!(fields.iter().all(|(_, v)| v.len() == ts.len()));
                assert!(fields
                    .iter()
                    .all(|(_, v)| v.iter().all(|x| (0.0..1000.0).contains(x))));
                let key = format!("{tags:?}");
                for t in ts {
                    assert!(seen.insert((key.clone(), t)), "duplicate {key} {t}");
                }
                *per_series.entry(key).or_default() += 1;
            }
        }
        assert_eq!(per_series.len(), 25);
        assert_eq!(seen.len(), 600);
    }

    #[test]
    fn msgpack_and_lp_carry_the_same_points() {
        let lp = Payloads::build(&PayloadSpec::new(Format::LineProtocol, 40, 7, 2))
            .unwrap_or_else(|e| panic!("{e}"));
        let mp = Payloads::build(&PayloadSpec::new(Format::Msgpack, 40, 7, 2))
            .unwrap_or_else(|e| panic!("{e}"));
        for seq in [0u64, 3, 11] {
            let mut a: Vec<(String, u64, Vec<f64>)> = parse_lp(&lp.body(seq).unwrap_or_default());
            let mut b: Vec<(String, u64, Vec<f64>)> = Vec::new();
            for (m, tags, ts, fields) in decode_msgpack(&mp.body(seq).unwrap_or_default()) {
                let key = format!("{m},host={},region={}", tags[0].1, tags[1].1);
                for (k, t) in ts.iter().enumerate() {
                    b.push((
                        key.clone(),
                        *t as u64,
                        fields.iter().map(|f| f.1[k]).collect(),
                    ));
                }
            }
            a.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
            b.sort_by(|x, y| (&x.0, x.1).cmp(&(&y.0, y.1)));
            assert_eq!(a, b);
        }
    }
}
