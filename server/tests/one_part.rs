//! A flush lands in chDB as one part, whatever its size (its own binary: chDB allows one data
//! path per process).

use chdb_rust::format::OutputFormat;
use sluice_server::catalog::create_table_sql;
use sluice_server::engine::Engine;

/// Recovery decides per WAL entry whether it is in the table, which is only sound if an insert
/// lands whole: chDB commits each block of an insert as its own part, so a flush larger than
/// its default squashing size (about 1 M rows or 256 MiB) would otherwise become several parts
/// that a crash could separate, leaving an entry half present.
#[test]
fn a_flush_larger_than_chdb_block_size_lands_as_one_part() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1).unwrap();
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
    let out = engine
        .query(
            "SELECT count(), sum(rows) FROM system.parts WHERE active AND table = 't'",
            OutputFormat::TabSeparated,
        )
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out).trim(), format!("1\t{rows}"));
}
