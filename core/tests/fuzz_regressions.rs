//! Inputs the fuzz targets (`fuzz/`, run by `bench/fuzz`) failed on, replayed against the same
//! checks: `fuzz/src/lib.rs` is included here by path, so a reproducer saved in
//! `tests/fuzz_regressions/<target>/` is checked exactly as the fuzzer checked it (no panic, the
//! body and batch invariants, the allocation bounds, the codec round trips). Add a file there
//! for every crash the fuzzer finds, whatever its name.

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod checks;

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

// The allocation bounds are checked only with the counting allocator installed.
#[global_allocator]
static ALLOC: checks::Meter = checks::Meter;

/// Every file of `tests/fuzz_regressions/<target>/`, sorted (none if the directory is absent).
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.expect("readable directory entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Runs `check` on every input of `target`, then fails listing every input that panicked.
fn replay(target: &str, check: fn(&[u8])) {
    let mut failed = Vec::new();
    let files = inputs(target);
    for path in &files {
        let data = std::fs::read(path).expect("readable input");
        if panic::catch_unwind(AssertUnwindSafe(|| check(&data))).is_err() {
            failed.push(path.display().to_string());
        }
    }
    eprintln!("{target}: {} inputs replayed", files.len());
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs fail (panic messages above):\n  {}",
        failed.len(),
        files.len(),
        failed.join("\n  ")
    );
}

#[test]
fn lp() {
    replay("lp", checks::check_lp);
}

#[test]
fn msgpack() {
    replay("msgpack", checks::check_msgpack);
}

#[test]
fn codec() {
    replay("codec", checks::check_codec);
}
