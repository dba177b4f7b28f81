//! Reads never stop to JIT-compile: chDB compiles an expression on the query thread the
//! third time it sees one, and that query waits for the compiler (10-70 ms, more than a
//! one-host dashboard query takes). The reader connections turn it off (`reader_settings`).
//! Its own binary: chDB allows one data path per process, and its event counters are the
//! process's.

use chdb_rust::format::OutputFormat;
use sluice_core::config::ServerConfig;
use sluice_server::engine::{Engine, ReadSettings, Readers};
use std::time::Duration;

/// How many expressions the engine has compiled since the process started.
fn compiled(engine: &Engine) -> u64 {
    let out = engine
        .query(
            "SELECT sum(value) FROM system.events WHERE event = 'CompileFunction'",
            OutputFormat::TabSeparated,
        )
        .unwrap();
    String::from_utf8_lossy(&out).trim().parse().unwrap_or(0)
}

#[test]
fn reads_never_compile_expressions() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig::default();
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1, &cfg.query).unwrap();
    engine
        .execute("CREATE TABLE t (k UInt64, t Int64, v Float64) ENGINE = MergeTree ORDER BY (k, t)")
        .unwrap();
    engine
        .execute(
            "INSERT INTO t SELECT number % 100, number * 1000000000, number FROM numbers(200000)",
        )
        .unwrap();
    // A plan's kind of expression: a time bucket in integer arithmetic and an aggregate.
    let sql = "SELECT toInt64((t + 0 - 0) - (((t % 60000000000) + 60000000000) % 60000000000)) AS b, avg(v) FROM t WHERE k = 7 GROUP BY b ORDER BY b";
    let read = |settings: &ReadSettings| {
        let mut rows = 0;
        engine
            .stream_with(
                Readers::Local,
                settings,
                sql,
                false,
                Duration::from_secs(10),
                &mut |chunk| {
                    rows += chunk.len();
                    true
                },
            )
            .unwrap();
        assert!(rows > 0);
    };
    let before = compiled(&engine);
    let planned = ReadSettings {
        planned: true,
        ..Default::default()
    };
    for _ in 0..6 {
        read(&planned);
        read(&ReadSettings::default());
    }
    assert_eq!(
        compiled(&engine),
        before,
        "a read compiled expressions: reader connections must run with compile_expressions = 0"
    );
    // The counter does count: the same query on a connection that compiles.
    for _ in 0..6 {
        engine
            .query(
                &format!(
                    "{sql} SETTINGS compile_expressions = 1, min_count_to_compile_expression = 0"
                ),
                OutputFormat::TabSeparated,
            )
            .unwrap();
    }
    assert!(
        compiled(&engine) > before,
        "system.events counted no compiled expression where the engine should compile"
    );
}
