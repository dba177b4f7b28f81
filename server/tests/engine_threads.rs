//! How many threads a query gets under the default memory budget. chDB lowers a query's
//! threads to its engine's free memory over `max_threads_min_free_memory_per_thread`; at
//! chDB's default (1 GiB a thread) every query of the 1 GiB budget (an engine limit of 435 MiB)
//! ran on one thread. Its own binary: chDB allows one data path per process, and the limit is
//! the process's.

use sluice_core::config::ServerConfig;
use sluice_server::engine::{Engine, ReadSettings, Readers};
use std::time::Duration;

#[test]
fn default_budget_queries_use_two_threads_and_key_order_reads_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::default();
    let plan = sluice_server::memory::plan(&cfg, None);
    sluice_server::memory::apply(&plan, &mut cfg);
    assert!(
        plan.engine_memory_bytes() < 1 << 30,
        "the default budget's engine limit is no longer small: {}",
        plan.engine_memory_bytes()
    );
    let engine = Engine::open_within(
        &dir.path().join("chdb"),
        1,
        1,
        &cfg.query,
        Some(plan.engine_memory_bytes()),
    )
    .unwrap();
    engine
        .execute("CREATE TABLE t (k UInt64, v Float64) ENGINE = MergeTree ORDER BY k")
        .unwrap();
    for part in 0..4 {
        engine
            .execute(&format!(
                "INSERT INTO t SELECT number * 4 + {part}, number FROM numbers(200000)"
            ))
            .unwrap();
    }
    let pipeline = |settings: &ReadSettings, sql: &str| {
        let mut out = Vec::new();
        engine
            .stream_with(
                Readers::Local,
                settings,
                &format!("EXPLAIN PIPELINE {sql}"),
                false,
                Duration::from_secs(5),
                &mut |chunk| {
                    out.extend(chunk);
                    true
                },
            )
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    let text = pipeline(
        &ReadSettings::default(),
        "SELECT k % 100 AS g, max(v) FROM t GROUP BY g",
    );
    assert!(
        text.contains("AggregatingTransform × 2"),
        "the aggregation should run on two threads (max_threads = 2):\n{text}"
    );
    // A read in key order holds a stream of every part per thread: it stays on one.
    let in_order = ReadSettings {
        aggregation_in_order: true,
        ..Default::default()
    };
    let text = pipeline(&in_order, "SELECT k, max(v) FROM t GROUP BY k");
    assert!(
        text.contains("AggregatingInOrderTransform") && !text.contains("× 2"),
        "an aggregation in key order should run on one thread:\n{text}"
    );
}
