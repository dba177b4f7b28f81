//! WAL codec: `sluice_core::codec::decode` of arbitrary bytes and encode/decode round trips (see `sluice_fuzz::check_codec`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// Counts allocations so the check can bound what one call allocates.
#[global_allocator]
static ALLOC: sluice_fuzz::Meter = sluice_fuzz::Meter;

fuzz_target!(|data: &[u8]| sluice_fuzz::check_codec(data));
