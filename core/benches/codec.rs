//! WAL entry encoding cost and size for the payload shape: a 50,000-point batch of
//! 10,000 series, one timestamp, five float fields. Two value kinds: decimals with two digits
//! (what agents send, stored as scaled integers) and full-precision noise (stored raw).
//!
//! Run: `cargo bench -p sluice-core --bench codec`.

use std::time::{Duration, Instant};

use sluice_core::{codec, ColumnValues, FieldColumn, MeasurementBatch};

/// The server's allocator, so the numbers are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const POINTS: usize = 50_000;

fn batch(value: impl Fn(usize, usize) -> f64) -> MeasurementBatch {
    let mut b = MeasurementBatch::new("m".into());
    b.series_id = (0..POINTS)
        .map(|i| (i % 10_000) as u64 * 0x9E37_79B9)
        .collect();
    b.time_ns = vec![1_700_000_000_000_000_000; POINTS];
    for f in 0..5 {
        b.fields.push(FieldColumn {
            name: format!("f{f}"),
            values: ColumnValues::Float((0..POINTS).map(|i| value(i, f)).collect()),
            valid: vec![true; POINTS],
        });
    }
    b
}

/// (ns per point to encode, bytes per point, ns per point to decode).
fn measure(b: &MeasurementBatch, budget: Duration) -> (f64, f64, f64) {
    let mut out = Vec::new();
    let started = Instant::now();
    let mut n = 0;
    while n < 3 || started.elapsed() < budget {
        out.clear();
        codec::encode(std::hint::black_box(b), &mut out);
        n += 1;
    }
    let encode = started.elapsed().as_secs_f64() * 1e9 / (n * POINTS) as f64;
    let started = Instant::now();
    let mut m = 0;
    while m < 3 || started.elapsed() < budget {
        let back = codec::decode(std::hint::black_box(&out));
        assert!(back.is_ok());
        m += 1;
    }
    let decode = started.elapsed().as_secs_f64() * 1e9 / (m * POINTS) as f64;
    (encode, out.len() as f64 / POINTS as f64, decode)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    println!(
        "{:<28} {:>14} {:>14} {:>14}",
        "values", "encode ns/pt", "bytes/pt", "decode ns/pt"
    );
    let decimals = batch(|i, f| ((i as u64 * 7919 + f as u64 * 31) % 100_000) as f64 / 100.0);
    let noise = batch(|i, f| ((i * 5 + f) as f64 * 0.618_033_988_749_894_9).sin() * 1e3);
    for (name, b) in [
        ("two-digit decimals", &decimals),
        ("full-precision noise", &noise),
    ] {
        let (enc, bytes, dec) = measure(b, budget);
        println!("{name:<28} {enc:>14.1} {bytes:>14.1} {dec:>14.1}");
    }
}
