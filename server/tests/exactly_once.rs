//! The crash window that matters most, made deterministic: the insert reached chDB but the
//! process died before the WAL range was deleted. Recovery inserts the same range again with the
//! same token; chDB must drop it, and the WAL must end up empty. Real RocksDB, real chDB.

use std::sync::Arc;

use chdb_rust::format::OutputFormat;
use sluice_core::{lp, NoSchema, ParseOptions, Precision};
use sluice_server::catalog::create_table_sql;
use sluice_server::engine::Engine;
use sluice_server::flush::{recover_intents, Flusher};
use sluice_server::metrics::Metrics;
use sluice_server::payload;
use sluice_server::wal::{CommitObserver, Entry, Wal};

struct NoObs;
impl CommitObserver for NoObs {
    fn group_committed(&self, _: usize, _: u64, _: f64) {}
}

fn count(engine: &Engine) -> String {
    let out = engine
        .query("SELECT count(), sum(v) FROM t", OutputFormat::TabSeparated)
        .expect("count");
    String::from_utf8_lossy(&out).trim().to_string()
}

async fn commit(wal: &Wal, batch: &sluice_core::MeasurementBatch) {
    wal.submit(vec![Entry {
        table: "t".into(),
        rows: batch.len() as u32,
        payload: payload::encode_measurement(batch),
    }])
    .unwrap()
    .await
    .unwrap()
    .unwrap();
}

#[tokio::test]
async fn an_insert_replayed_after_a_crash_is_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(&dir.path().join("chdb"), 1, 1).unwrap());
    let wal = Arc::new(
        Wal::open(
            &dir.path().join("wal"),
            8,
            Box::new(|_| {}),
            Arc::new(NoObs),
        )
        .unwrap(),
    );
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
    let rb = sluice_server::arrow_batch::measurement_batches(&decoded).unwrap();
    engine.insert("t", rb, "t/1-2").unwrap();
    assert_eq!(count(&engine), "6\t12");

    // The restart: the intent is found and replayed; chDB drops the duplicate.
    assert_eq!(wal.intents().unwrap(), vec![("t".to_string(), 1, 2)]);
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(
        count(&engine),
        "6\t12",
        "the replayed insert must be deduplicated"
    );
    assert!(wal.intents().unwrap().is_empty());
    assert!(
        wal.pending().unwrap().is_empty(),
        "the range is deleted after the replay"
    );

    // And the other side of the window: intent recorded, insert never happened. The replay
    // inserts it (once).
    commit(&wal, batch).await;
    wal.set_intent("t", 3, 3).unwrap();
    assert_eq!(recover_intents(&flusher).unwrap(), 1);
    assert_eq!(count(&engine), "9\t18");
    assert!(wal.pending().unwrap().is_empty());
    wal.close();
}
