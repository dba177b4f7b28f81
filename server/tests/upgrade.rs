//! A data directory written by an earlier version: its measurement tables lack the WAL
//! sequence column (`_sluice_seq`). Loading the catalog adds it; old rows read as 0 (no WAL
//! entry has that number); flushing and recovery work on the table as on a new one.

mod common;

use std::sync::Arc;

use chdb_rust::format::OutputFormat;
use sluice_core::config::ServerConfig;
use sluice_core::{lp, NoSchema, ParseOptions, Precision};
use sluice_server::catalog::{tables_without_merge_policy, Catalog, MERGE_SETTINGS, SEQ_COLUMN};
use sluice_server::engine::Engine;
use sluice_server::flush::{recover_intents, Flusher};
use sluice_server::metrics::Metrics;

fn query(engine: &Engine, sql: &str) -> String {
    let out = engine.query(sql, OutputFormat::TabSeparated).unwrap();
    String::from_utf8_lossy(&out).trim().to_string()
}

#[tokio::test]
async fn tables_of_an_earlier_version_get_the_sequence_column() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        Arc::new(Engine::open(&dir.path().join("chdb"), 1, 1, &Default::default()).unwrap());
    // The table as the first version created it, with one row.
    engine
        .execute(
            "CREATE TABLE old (`time` DateTime64(9, 'UTC'), `series_id` UInt64, `v` Nullable(Float64)) \
             ENGINE = MergeTree ORDER BY (`series_id`, `time`) SETTINGS non_replicated_deduplication_window = 1000",
        )
        .unwrap();
    engine
        .execute("INSERT INTO old VALUES (1, 7, 1.5)")
        .unwrap();
    // A table of a version that had part of today's merge policy.
    engine
        .execute(
            "CREATE TABLE prev (`time` DateTime64(9, 'UTC'), `series_id` UInt64, `v` Nullable(Float64)) \
             ENGINE = MergeTree ORDER BY (`series_id`, `time`) SETTINGS merge_selector_base = 20",
        )
        .unwrap();
    assert_eq!(
        tables_without_merge_policy(&engine).unwrap(),
        ["old", "prev"]
    );
    let wal = common::open_wal(&dir.path().join("wal"));

    let catalog = Catalog::load(engine.clone(), &ServerConfig::default(), &wal).unwrap();
    assert_eq!(
        query(
            &engine,
            &format!(
                "SELECT count() FROM system.columns WHERE table = 'old' AND name = '{SEQ_COLUMN}'"
            )
        ),
        "1"
    );
    // The field types are what they were; the new column is not a field.
    assert_eq!(
        catalog.field_type("old", "v"),
        Some(sluice_core::FieldType::Float)
    );
    assert_eq!(catalog.field_type("old", SEQ_COLUMN), None);
    // It merges like a table made today, and so does the series table.
    for (name, value) in MERGE_SETTINGS {
        assert_eq!(
            query(
                &engine,
                &format!(
                    "SELECT name FROM system.tables WHERE database = currentDatabase() \
                     AND create_table_query LIKE '%{name} = {value}%' ORDER BY name"
                )
            ),
            "old\nprev\nsluice_series",
            "{name}"
        );
    }
    // Before the load both old tables lacked it; now none does, so loading again alters nothing.
    assert!(tables_without_merge_policy(&engine).unwrap().is_empty());
    // Loading again is a no-op.
    Catalog::load(engine.clone(), &ServerConfig::default(), &wal).unwrap();
    assert_eq!(
        query(&engine, &format!("SELECT {SEQ_COLUMN}, v FROM old")),
        "0\t1.5"
    );
    // `SELECT *` does not show it.
    assert_eq!(
        query(&engine, "SELECT * FROM old"),
        "1970-01-01 00:00:00.000000001\t7\t1.5"
    );

    // An interrupted flush into the old table settles like any other.
    let parsed = lp::parse(
        b"old,h=a v=2 2\nold,h=b v=3 3\n",
        &ParseOptions::new(Precision::Nanosecond, 0),
        &NoSchema,
    );
    let batch = &parsed.batches[0];
    common::commit_batch(&wal, "old", batch).await;
    wal.set_intent("old", 1, 1).unwrap();
    let flusher = Flusher {
        wal: wal.clone(),
        engine: engine.clone(),
        metrics: Arc::new(Metrics::new()),
        max_rows: 1000,
    };
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(
        query(
            &engine,
            &format!("SELECT count(), sum(v), groupArray({SEQ_COLUMN}) FROM (SELECT * , {SEQ_COLUMN} FROM old ORDER BY time)")
        ),
        "3\t6.5\t[0,1,1]"
    );
    assert!(wal.pending().unwrap().is_empty());
    wal.close();
}
