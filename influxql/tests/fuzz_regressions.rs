//! The `influxql` fuzz target's checks (`fuzz/src/influxql.rs`, included here by path) over
//! its checked-in seeds (`fuzz/corpus/influxql/`) and every input it failed on
//! (`tests/fuzz_regressions/influxql/`): no panic, bounded error messages, and statements
//! that print as text parsing back to themselves.

#[path = "../../fuzz/src/influxql.rs"]
mod checks;

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Every file of `dir` (relative to the repository), sorted; none if it is absent.
fn files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn seeds_and_saved_failures_pass_the_fuzz_checks() {
    let inputs: Vec<PathBuf> = [
        "fuzz/corpus/influxql",
        "influxql/tests/fuzz_regressions/influxql",
    ]
    .iter()
    .flat_map(|d| files(d))
    .collect();
    assert!(
        inputs.len() >= 40,
        "the seeds are missing: {}",
        inputs.len()
    );
    let failed: Vec<String> = inputs
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("readable input");
            panic::catch_unwind(AssertUnwindSafe(|| checks::check_influxql(&data))).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(failed.is_empty(), "failed: {failed:?}");
}
