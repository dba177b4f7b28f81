//! Line-protocol parse cost in nanoseconds per point, by the number of distinct series in a
//! 50,000-point body: the first sight of a series key in a body costs more (validation, tag
//! split, hashing) than a repeat, so cardinality is the variable that matters.
//!
//! Two columns: every series new (the first body a server sees), and every series known (the
//! steady state: the server remembers the raw keys of recorded series and the parser skips
//! them).
//!
//! Run: `cargo bench -p sluice-core --bench parse` (`-- --quick` for a short run). On a noisy
//! machine, count cycles instead: `PARSE_BENCH_ITERS=40 perf stat -e cycles:u <bench binary> 10000`
//! parses the body 2 x 40 times after one warm-up parse (new keys, then known keys).

use std::time::{Duration, Instant};

use sluice_core::testdata::KnownKeys;
use sluice_core::{lp, NoSchema, ParseOptions, Precision, SchemaLookup};

/// The server's allocator, so the numbers are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const POINTS: usize = 50_000;

/// ns per point and MB/s of parsing `text` with `schema` for about `budget`.
fn measure(text: &str, schema: &dyn SchemaLookup, budget: Duration) -> (f64, f64) {
    let opts = ParseOptions::new(Precision::Nanosecond, 0);
    let started = Instant::now();
    let mut n = 0usize;
    // A fixed count instead of a time budget, for counting cycles with `perf stat`.
    let fixed: Option<usize> = std::env::var("PARSE_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok());
    while match fixed {
        Some(iters) => n < iters,
        None => n < 3 || started.elapsed() < budget,
    } {
        let parsed = lp::parse(std::hint::black_box(text.as_bytes()), &opts, schema);
        assert_eq!(parsed.points, POINTS);
        n += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    (
        secs * 1e9 / (n * POINTS) as f64,
        (n * text.len()) as f64 / secs / 1e6,
    )
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let opts = ParseOptions::new(Precision::Nanosecond, 0);
    println!(
        "{:>8} {:>16} {:>10} {:>18}",
        "series", "new: ns/point", "MB/s", "known: ns/point"
    );
    // `-- 10000 50000` measures only those cardinalities (for a profiler).
    let mut only: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if only.is_empty() {
        only = vec![1, 100, 1_000, 10_000, 50_000];
    }
    for series in only {
        let text = sluice_core::testdata::cpu_body(POINTS, series, 1_700_000_000_000_000_000);
        let parsed = lp::parse(text.as_bytes(), &opts, &NoSchema);
        assert_eq!(parsed.points, POINTS);
        assert!(parsed.errors.is_empty());
        let known = KnownKeys::of(&parsed);
        let (new_ns, mbs) = measure(&text, &NoSchema, budget);
        let (known_ns, _) = measure(&text, &known, budget);
        println!("{series:>8} {new_ns:>16.1} {mbs:>10.0} {known_ns:>18.1}");
    }
}
