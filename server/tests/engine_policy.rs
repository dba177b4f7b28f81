//! How sluice sets chDB up for a write-heavy load: a flush lands as one part whatever its size
//! and leaves the flush worker at its priority, merges run at a lower CPU priority than
//! requests, and large parts merge vertically. Its own binary: chDB allows one data path per
//! process.

use chdb_rust::format::OutputFormat;
use sluice_server::catalog::create_table_sql;
use sluice_server::engine::Engine;

fn query(engine: &Engine, sql: &str) -> String {
    let out = engine.query(sql, OutputFormat::TabSeparated).unwrap();
    String::from_utf8_lossy(&out).trim().to_string()
}

/// One test for both, so the engine is opened and closed once (an engine left open at process
/// exit races chDB's static destructors).
#[test]
fn engine_policy() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1, &Default::default()).unwrap();
    merge_threads_yield_to_requests(&engine);
    a_flush_larger_than_chdb_block_size_lands_as_one_part(&engine);
    an_insert_leaves_the_flush_worker_below_the_request_path(&engine);
    large_parts_merge_vertically(&engine);
}

fn merge_threads_yield_to_requests(engine: &Engine) {
    assert_eq!(
        query(
            engine,
            "SELECT value FROM system.server_settings WHERE name = 'os_threads_nice_value_merge_mutate'"
        ),
        "10"
    );
}

/// Recovery decides per WAL entry whether it is in the table, which is only sound if an insert
/// lands whole: chDB commits each block of an insert as its own part, so a flush larger than
/// its default squashing size (about 1 M rows or 256 MiB) would otherwise become several parts
/// that a crash could separate, leaving an entry half present.
fn a_flush_larger_than_chdb_block_size_lands_as_one_part(engine: &Engine) {
    let rows = 2_500_000usize;
    let batch = sluice_core::MeasurementBatch {
        time_ns: (0..rows as i64).collect(),
        series_id: (0..rows as u64).map(|i| i % 1000).collect(),
        line: vec![1; rows],
        fields: vec![sluice_core::FieldColumn {
            name: "v".into(),
            values: sluice_core::ColumnValues::Float((0..rows).map(|i| i as f64).collect()),
            valid: vec![true; rows],
        }],
        ..sluice_core::MeasurementBatch::new("t".into())
    };
    engine
        .execute(&create_table_sql(
            "t",
            None,
            &[("v".into(), sluice_core::FieldType::Float)],
        ))
        .unwrap();
    let rb = sluice_server::arrow_batch::measurement_batches(&[batch], &[1]).unwrap();
    engine.insert("t", rb, Some("t/1-1")).unwrap();
    assert_eq!(
        query(
            engine,
            "SELECT count(), sum(rows) FROM system.parts WHERE active AND table = 't'"
        ),
        format!("1\t{rows}")
    );
}

/// chDB runs an insert at `os_threads_nice_value_query` and then sets the calling thread's
/// nice value to 0, not back to what it was: without `priority::keep` a flush worker ran every
/// flush after its first at the request path's priority.
fn an_insert_leaves_the_flush_worker_below_the_request_path(engine: &Engine) {
    use sluice_server::flush::FLUSH_NICE;
    use sluice_server::priority::{lower_thread_priority, own_nice};
    let batch = sluice_core::MeasurementBatch {
        time_ns: (0..1000).collect(),
        series_id: vec![7; 1000],
        line: vec![1; 1000],
        fields: vec![sluice_core::FieldColumn {
            name: "v".into(),
            values: sluice_core::ColumnValues::Float(vec![1.5; 1000]),
            valid: vec![true; 1000],
        }],
        ..sluice_core::MeasurementBatch::new("t".into())
    };
    let nice = std::thread::scope(|s| {
        s.spawn(|| {
            lower_thread_priority(FLUSH_NICE);
            let rb = sluice_server::arrow_batch::measurement_batches(&[batch], &[1]).unwrap();
            engine.insert("t", rb, Some("t/2-2")).unwrap();
            own_nice()
        })
        .join()
        .unwrap()
    });
    assert_eq!(nice, FLUSH_NICE.max(own_nice()));
}

/// A measurement table has fewer columns than chDB's threshold for vertical merges (11), which
/// cost about half as much CPU per row for sluice's tables; the table settings lower it
/// (`catalog::MERGE_SETTINGS`). chDB counts the columns a vertical merge gathers.
fn large_parts_merge_vertically(engine: &Engine) {
    let gathered = |engine: &Engine| -> u64 {
        query(
            engine,
            "SELECT sum(value) FROM system.events WHERE event = 'GatheredColumns'",
        )
        .parse()
        .unwrap_or(0)
    };
    engine
        .execute(&create_table_sql(
            "wide",
            None,
            &[
                ("a".into(), sluice_core::FieldType::Float),
                ("b".into(), sluice_core::FieldType::Float),
            ],
        ))
        .unwrap();
    for part in 0..2 {
        engine
            .execute(&format!(
                "INSERT INTO wide (time, series_id, a, b) SELECT number, number % 100, number, {part} FROM numbers(200000)"
            ))
            .unwrap();
    }
    let before = gathered(engine);
    engine.execute("OPTIMIZE TABLE wide FINAL").unwrap();
    assert_eq!(
        query(
            engine,
            "SELECT count(), sum(rows) FROM system.parts WHERE active AND table = 'wide'"
        ),
        "1\t400000"
    );
    assert!(
        gathered(engine) > before,
        "no column was gathered: the merge was horizontal"
    );
}
