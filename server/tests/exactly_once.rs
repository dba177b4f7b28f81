//! The crash windows of a flush, made deterministic, on real RocksDB and real chDB:
//! - the insert reached chDB but the process died before the WAL range was deleted: recovery
//!   must not insert it again, and the WAL must end up empty;
//! - the intent was recorded but the insert never happened: recovery inserts it once;
//! - chDB remembers the range's deduplication token but holds none of its rows (its
//!   deduplication log records a token before the part is committed, and a crash can fall in
//!   between): recovery must insert the rows, not trust the token;
//! - part of a range is present (an earlier attempt of a smaller range committed, then the
//!   insert failed): recovery inserts only the missing entries.

mod common;

use std::sync::Arc;

use chdb_rust::format::OutputFormat;
use sluice_core::{lp, NoSchema, ParseOptions, Precision};
use sluice_server::catalog::create_table_sql;
use sluice_server::engine::Engine;
use sluice_server::flush::{recover_intents, Flusher};
use sluice_server::metrics::Metrics;
use sluice_server::payload;
use sluice_server::wal::Wal;

fn count(engine: &Engine) -> String {
    let out = engine
        .query("SELECT count(), sum(v) FROM t", OutputFormat::TabSeparated)
        .expect("count");
    String::from_utf8_lossy(&out).trim().to_string()
}

async fn commit(wal: &Wal, batch: &sluice_core::MeasurementBatch) {
    common::commit_batch(wal, "t", batch).await;
}

#[tokio::test]
async fn recovery_inserts_exactly_the_entries_the_table_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        Arc::new(Engine::open(&dir.path().join("chdb"), 1, 1, &Default::default()).unwrap());
    let wal = common::open_wal(&dir.path().join("wal"));
    let parsed = lp::parse(
        b"t,h=a v=1 1\nt,h=b v=2 2\nt,h=a v=3 3\n",
        &ParseOptions::new(Precision::Nanosecond, 0),
        &NoSchema,
    );
    let batch = &parsed.batches[0];
    let fields: Vec<_> = batch
        .fields
        .iter()
        .map(|c| (c.name.clone(), c.field_type()))
        .collect();
    engine
        .execute(&create_table_sql("t", None, &fields))
        .unwrap();
    for _ in 0..2 {
        commit(&wal, batch).await;
    }
    let flusher = Flusher {
        wal: wal.clone(),
        engine: engine.clone(),
        metrics: Arc::new(Metrics::new()),
        max_rows: 1000,
    };

    // What a flush does up to the crash: intent, then the insert under the range's token.
    let entries = wal.read_batch("t", 1000, None).unwrap();
    assert_eq!(entries.len(), 2);
    wal.set_intent("t", 1, 2).unwrap();
    let decoded: Vec<_> = entries
        .iter()
        .map(|e| match payload::decode(&e.payload).unwrap() {
            payload::Payload::Measurement(b) => b,
            payload::Payload::Series(_) => unreachable!("measurement entries"),
        })
        .collect();
    let rb = sluice_server::arrow_batch::measurement_batches(&decoded, &[1, 2]).unwrap();
    engine.insert("t", rb, Some("t/1-2")).unwrap();
    assert_eq!(count(&engine), "6\t12");

    // The restart: the intent is found; the table already holds both entries.
    assert_eq!(wal.intents().unwrap(), vec![("t".to_string(), 1, 2)]);
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(
        count(&engine),
        "6\t12",
        "the replayed range must not be inserted twice"
    );
    assert!(wal.intents().unwrap().is_empty());
    assert!(
        wal.pending().unwrap().is_empty(),
        "the range is deleted after the replay"
    );

    // The other side of the window: intent recorded, insert never happened. The replay
    // inserts it (once).
    commit(&wal, batch).await;
    wal.set_intent("t", 3, 3).unwrap();
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(count(&engine), "9\t18");
    assert!(wal.pending().unwrap().is_empty());

    // chDB knows the token of range 4..=4 but holds none of its rows: here another insert used
    // the token (a crash between chDB's deduplication-log write and its part commit leaves
    // the same state). Trusting the token would lose the range.
    commit(&wal, batch).await;
    wal.set_intent("t", 4, 4).unwrap();
    let other = lp::parse(
        b"t,h=z v=100 100\n",
        &ParseOptions::new(Precision::Nanosecond, 0),
        &NoSchema,
    );
    let rb = sluice_server::arrow_batch::measurement_batches(&other.batches, &[999]).unwrap();
    engine.insert("t", rb, Some("t/4-4")).unwrap();
    assert_eq!(count(&engine), "10\t118");
    // What replaying under the token would do: chDB drops the rows as a duplicate.
    let four = wal.read_batch("t", 1000, Some(4)).unwrap();
    let decoded4 = match payload::decode(&four[0].payload).unwrap() {
        payload::Payload::Measurement(b) => b,
        payload::Payload::Series(_) => unreachable!("measurement entries"),
    };
    let rb = sluice_server::arrow_batch::measurement_batches(&[decoded4], &[4]).unwrap();
    engine.insert("t", rb, Some("t/4-4")).unwrap();
    assert_eq!(
        count(&engine),
        "10\t118",
        "chDB deduplicates by token alone"
    );
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(
        count(&engine),
        "13\t124",
        "rows whose token chDB remembers without them must still be inserted"
    );
    assert!(wal.pending().unwrap().is_empty());

    // Part of a range present: entry 5 was committed by an earlier attempt (5..=5) whose
    // answer was lost; the intent now covers 5..=6. Only entry 6 is inserted.
    commit(&wal, batch).await;
    commit(&wal, batch).await;
    let five = wal.read_batch("t", 1000, Some(5)).unwrap();
    assert_eq!(five.len(), 1);
    let decoded5 = match payload::decode(&five[0].payload).unwrap() {
        payload::Payload::Measurement(b) => b,
        payload::Payload::Series(_) => unreachable!("measurement entries"),
    };
    let rb = sluice_server::arrow_batch::measurement_batches(&[decoded5], &[5]).unwrap();
    engine.insert("t", rb, Some("t/5-5")).unwrap();
    wal.set_intent("t", 5, 6).unwrap();
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(count(&engine), "19\t136", "entry 5 once, entry 6 once");
    assert!(wal.pending().unwrap().is_empty());
    assert!(wal.intents().unwrap().is_empty());
    wal.close();
}
