//! How many threads a query gets under the default memory budget. chDB lowers a query's
//! threads to its engine's free memory over `max_threads_min_free_memory_per_thread`; at
//! chDB's default (1 GiB a thread) every query of the 1 GiB budget (an engine limit of 435 MiB)
//! ran on one thread. Planned InfluxQL reads lower it to half a query's memory, and so do the
//! reads that gather the pods' shares (one thread per pod); a client's `/sql` keeps chDB's rule. Its own binary: chDB allows one data path per process, and the
//! limit is the process's.

use sluice_core::config::ServerConfig;
use sluice_server::engine::{Engine, ReadSettings, Readers};
use std::time::Duration;

#[test]
fn default_budget_planned_reads_use_two_threads_and_sql_one() {
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
    .unwrap()
    .with_gatherers(
        1,
        &cfg.query,
        cfg.cluster.connect_timeout,
        cfg.cluster.receive_timeout,
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
    let pipeline_on = |readers: Readers, settings: &ReadSettings, sql: &str| {
        let mut out = Vec::new();
        engine
            .stream_with(
                readers,
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
    let pipeline = |settings: &ReadSettings, sql: &str| pipeline_on(Readers::Local, settings, sql);

    // A gathering read fetches every pod's share at once (as `gather` asks: one thread per
    // pod), not one pod after the other.
    let text = pipeline_on(
        Readers::Gather,
        &ReadSettings::default(),
        "SELECT count() FROM url('http://{127.0.0.1,127.0.0.2,127.0.0.3}:9/share', Native, 'a UInt8') SETTINGS max_threads = 3",
    );
    assert!(
        text.contains("URL × 3"),
        "a gathering read should fetch the three pods side by side:\n{text}"
    );
    let grouped = "SELECT k % 100 AS g, max(v) FROM t GROUP BY g";
    let planned = ReadSettings {
        planned: true,
        ..Default::default()
    };
    let text = pipeline(&planned, grouped);
    assert!(
        text.contains("AggregatingTransform × 2"),
        "a planned aggregation should run on two threads (max_threads = 2):\n{text}"
    );
    let text = pipeline(&ReadSettings::default(), grouped);
    assert!(
        text.contains("AggregatingTransform") && !text.contains("× 2"),
        "a client's /sql keeps chDB's rule, one thread under this limit:\n{text}"
    );
    // In key order too: a planned read on two threads, others on one.
    let in_order = ReadSettings {
        aggregation_in_order: true,
        planned: true,
        ..Default::default()
    };
    let by_key = "SELECT k, max(v) FROM t GROUP BY k";
    let text = pipeline(&in_order, by_key);
    assert!(
        text.contains("AggregatingInOrderTransform") && text.contains("× 2"),
        "a planned aggregation in key order should run on two threads:\n{text}"
    );
    let one = ReadSettings {
        planned: false,
        ..in_order
    };
    let text = pipeline(&one, by_key);
    assert!(
        text.contains("AggregatingInOrderTransform") && !text.contains("× 2"),
        "an unplanned aggregation in key order should run on one thread:\n{text}"
    );

    // On two threads `uniqExact` builds a set per thread: 3 M keys need 130 MiB there and fit
    // the 128 MiB of a query on one. A planned read that runs out of memory before it answered
    // runs again on one thread.
    let text = pipeline(
        &planned,
        "SELECT uniqExact(number % 3000000) FROM numbers_mt(40000000)",
    );
    assert!(
        text.contains("AggregatingTransform × 2"),
        "two threads at first:\n{text}"
    );
    let mut out = Vec::new();
    engine
        .stream_with(
            Readers::Local,
            &planned,
            "SELECT uniqExact(number % 3000000) AS n FROM numbers_mt(40000000)",
            false,
            Duration::from_secs(5),
            &mut |chunk| {
                out.extend(chunk);
                true
            },
        )
        .expect("the read again on one thread");
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("3000000"), "{out}");
}
