//! Line protocol: `sluice_core::lp::parse` of arbitrary bytes (see `sluice_fuzz::check_lp`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Counts allocations so the check can bound what one call allocates.
#[global_allocator]
static ALLOC: sluice_fuzz::Meter = sluice_fuzz::Meter;

fuzz_target!(|data: &[u8]| sluice_fuzz::check_lp(data));
