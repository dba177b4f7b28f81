//! The engine's own memory limit (`Engine::open_within`, set from the memory budget): past it
//! an allocation fails the statement with an error instead of growing the process. Its own
//! binary: chDB allows one data path per process, and the limit is the process's.

use chdb_rust::format::OutputFormat;
use sluice_server::engine::Engine;

#[test]
fn a_statement_past_the_engines_memory_limit_fails_and_the_engine_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open_within(
        &dir.path().join("chdb"),
        1,
        1,
        &Default::default(),
        Some(96 << 20),
    )
    .unwrap();
    // About 400 MB in one array, on a connection without per-query limits: only the engine-wide
    // limit can stop it (without it the statement succeeds).
    let err = engine
        .query(
            "SELECT count() FROM (SELECT groupArray(number) FROM numbers(50000000))",
            OutputFormat::TabSeparated,
        )
        .expect_err("a statement needing far more than 96 MiB must fail");
    let msg = err.to_string();
    assert!(msg.contains("(total)"), "not the engine-wide limit: {msg}");
    let ok = engine
        .query("SELECT 1", OutputFormat::TabSeparated)
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ok).trim(), "1");
}
