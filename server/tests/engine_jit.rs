//! Reads never stop to JIT-compile: chDB compiles an expression on the query thread the
//! third time it sees one, and that query waits for the compiler (10-70 ms, more than a
//! one-host dashboard query takes). The reader connections turn it off (`reader_settings`),
//! and the engine's join runtime filters with it.
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

    // Nor do they build join runtime filters (the series join's cost 31 of the last point's
    // 41 ms): the setting is known to the engine and in force on every kind of read.
    for settings in [&planned, &ReadSettings::default()] {
        let mut out = Vec::new();
        engine
            .stream_with(
                Readers::Local,
                settings,
                "SELECT getSetting('enable_join_runtime_filters') FORMAT TSV",
                false,
                Duration::from_secs(10),
                &mut |chunk| {
                    out.extend_from_slice(&chunk);
                    true
                },
            )
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out).trim(), "false");
    }
    let default = engine
        .query(
            "SELECT getSetting('enable_join_runtime_filters')",
            OutputFormat::TabSeparated,
        )
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&default).trim(),
        "true",
        "the engine's own default, which readers turn off"
    );
}
