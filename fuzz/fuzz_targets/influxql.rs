//! InfluxQL: `sluice_influxql::parse` of arbitrary text, and every statement it accepts
//! printed and parsed back (see `fuzz/src/influxql.rs`), on a server worker's 2 MiB stack and
//! within a bound on what it allocates.
#![no_main]

#[path = "../src/influxql.rs"]
mod check;

use libfuzzer_sys::fuzz_target;

// Counts allocations so the check can bound what one call allocates.
#[global_allocator]
static ALLOC: sluice_fuzz::Meter = sluice_fuzz::Meter;

/// What parsing, printing and parsing again may allocate for `len` bytes of query.
fn alloc_limit(len: usize) -> usize {
    (1 << 20) + 1024 * len
}

fuzz_target!(|data: &[u8]| {
    let input = data.to_vec();
    let len = input.len();
    let peak = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || sluice_fuzz::measure(|| check::check_influxql(&input)).1)
        .expect("a thread")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(
        peak <= alloc_limit(len),
        "{peak} bytes allocated for a {len}-byte query"
    );
});
