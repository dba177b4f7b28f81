//! Per-stage cost of the write path, in nanoseconds per point, on 50,000-point line-protocol
//! requests (10,000 series, 5 float fields), against the budget in DESIGN.md; then a first
//! end-to-end figure through HTTP.
//!
//! Run: `cargo bench -p sluice-server --bench stages` (add `-- --quick` for a short run).
//! Every stage runs on the real parts: the real parser, RocksDB with fsync, chDB.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::testdata::KnownKeys;
use sluice_core::{lp, NoSchema, ParseOptions, Precision};
use sluice_server::arrow_batch;
use sluice_server::catalog::create_table_sql;
use sluice_server::engine::Engine;
use sluice_server::payload;
use sluice_server::wal::{CommitObserver, Entry, Wal};

const POINTS: usize = 50_000;
const SERIES: usize = 10_000;

/// The server's allocator, so the numbers are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct NoObs;
impl CommitObserver for NoObs {
    fn group_committed(&self, _: usize, _: u64, _: f64) {}
}

/// The payload every benchmark measures (`sluice_core::testdata::cpu_body`).
pub use sluice_core::testdata::cpu_body as body;

/// CPU time of this process (all threads, chDB's included), from `/proc/self/stat`.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Runs `f` until `budget` elapses (at least `min` times) and returns wall and process-CPU ns
/// per point: a stage that waits on the disk costs wall time, one that fans out over threads
/// costs CPU beyond its wall time.
fn measure(budget: Duration, min: usize, mut f: impl FnMut()) -> (f64, f64) {
    f(); // warm-up
    let cpu0 = process_cpu();
    let started = Instant::now();
    let mut n = 0;
    while n < min || started.elapsed() < budget {
        f();
        n += 1;
    }
    let points = (n * POINTS) as f64;
    (
        started.elapsed().as_nanos() as f64 / points,
        (process_cpu() - cpu0).as_nanos() as f64 / points,
    )
}

struct Row {
    stage: &'static str,
    ns: f64,
    cpu: f64,
    budget: Option<f64>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = if quick {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(3)
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let text = body(POINTS, SERIES, 1_700_000_000_000_000_000);
    let opts = ParseOptions::new(Precision::Nanosecond, 0);
    let mut rows = Vec::new();

    // Parse, every series new to the server: keys validated, canonicalised and hashed.
    let (ns, cpu) = measure(budget, 3, || {
        let parsed = lp::parse(text.as_bytes(), &opts, &NoSchema);
        assert_eq!(parsed.points, POINTS);
    });
    rows.push(Row {
        stage: "parse (new series)",
        ns,
        cpu,
        budget: None,
    });
    let parsed = lp::parse(text.as_bytes(), &opts, &NoSchema);
    // Parse in the steady state: the server remembers the raw keys of recorded series.
    let known = KnownKeys::of(&parsed);
    let (ns, cpu) = measure(budget, 3, || {
        let parsed = lp::parse(text.as_bytes(), &opts, &known);
        assert_eq!(parsed.points, POINTS);
        assert!(parsed.new_keys.is_empty());
    });
    rows.push(Row {
        stage: "parse (known series)",
        ns,
        cpu,
        budget: Some(150.0),
    });
    let batch = &parsed.batches[0];
    assert_eq!(batch.series.len(), SERIES);

    // Series: the warm-cache claim the server does per request (all series known).
    let known: std::collections::HashSet<u64> = batch.series.iter().map(|s| s.id).collect();
    let (ns, cpu) = measure(budget, 3, || {
        let mut new = 0;
        for id in &batch.series_id {
            if !known.contains(id) {
                new += 1;
            }
        }
        assert_eq!(new, 0);
    });
    rows.push(Row {
        stage: "series (warm lookup)",
        ns,
        cpu,
        budget: Some(60.0),
    });

    // Encode for the WAL (done on request tasks).
    let (ns, cpu) = measure(budget, 3, || {
        let p = payload::encode_measurement(batch);
        assert!(p.len() > POINTS);
    });
    rows.push(Row {
        stage: "wal encode",
        ns,
        cpu,
        budget: None,
    });

    // WAL commit: RocksDB write + fsync, one request at a time and eight at once (group commit).
    let wal = Arc::new(
        Wal::open(
            &dir.path().join("wal"),
            64,
            Box::new(|_| {}),
            Arc::new(NoObs),
        )
        .expect("wal"),
    );
    let encoded = payload::encode_measurement(batch);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Steady state, as in the server: each committed range is deleted again (as a flush does),
    // so RocksDB's memtable never accumulates what a real server would already have flushed.
    let one = |n: usize| {
        let wal = wal.clone();
        let encoded = encoded.clone();
        let first = wal.last_seq() + 1;
        rt.block_on(async move {
            let rxs: Vec<_> = (0..n)
                .map(|_| {
                    wal.submit(vec![Entry {
                        table: "bench".into(),
                        rows: POINTS as u32,
                        payload: encoded.clone(),
                        batch: None,
                    }])
                    .expect("submit")
                })
                .collect();
            for rx in rxs {
                rx.await.expect("committer").expect("commit");
            }
            wal.complete("bench", first, wal.last_seq())
                .expect("complete");
        })
    };
    let (ns, cpu) = measure(budget, 3, || one(1));
    rows.push(Row {
        stage: "wal commit (1 request, fsync)",
        ns,
        cpu,
        budget: Some(50.0),
    });
    let (ns, cpu) = measure(budget, 3, || one(8));
    let (ns, cpu) = (ns / 8.0, cpu / 8.0);
    rows.push(Row {
        stage: "wal commit (8 concurrent)",
        ns,
        cpu,
        budget: Some(50.0),
    });

    // Arrow build from decoded WAL entries.
    let decoded = match payload::decode(&encoded).expect("decode") {
        payload::Payload::Measurement(b) => b,
        _ => unreachable!("measurement payload"),
    };
    let (ns, cpu) = measure(budget, 3, || {
        let decoded = match payload::decode(&encoded).expect("decode") {
            payload::Payload::Measurement(b) => b,
            _ => unreachable!("measurement payload"),
        };
        let rb =
            arrow_batch::measurement_batches(std::slice::from_ref(&decoded), &[1]).expect("arrow");
        assert_eq!(rb.num_rows(), POINTS);
    });
    rows.push(Row {
        stage: "wal decode + arrow build",
        ns,
        cpu,
        budget: Some(40.0),
    });

    // chDB insert through the real engine.
    let engine = Engine::open(&dir.path().join("chdb"), 1, 1, &Default::default()).expect("engine");
    let fields: Vec<_> = decoded
        .fields
        .iter()
        .map(|c| (c.name.clone(), c.field_type()))
        .collect();
    engine
        .execute(&create_table_sql("bench_cpu", None, &fields))
        .expect("create table");
    let rb = arrow_batch::measurement_batches(std::slice::from_ref(&decoded), &[1]).expect("arrow");
    let mut token = 0u64;
    let (ns, cpu) = measure(budget, 3, || {
        token += 1;
        engine
            .insert("bench_cpu", rb.clone(), Some(&format!("bench/{token}")))
            .expect("insert");
    });
    rows.push(Row {
        stage: "chdb insert (fsync'd part)",
        ns,
        cpu,
        budget: Some(250.0),
    });

    // The steady-state path: known series, WAL commits grouped 8 at a time.
    let counted = |r: &&Row| !r.stage.contains("1 request") && !r.stage.contains("new series");
    let total: f64 = rows.iter().filter(counted).map(|r| r.ns).sum();
    let total_cpu: f64 = rows.iter().filter(counted).map(|r| r.cpu).sum();
    println!(
        "\nstage costs, ns per point, {POINTS}-point requests, {SERIES} series, 5 float fields"
    );
    println!(
        "{:<34} {:>10} {:>10} {:>10}",
        "stage", "wall", "cpu", "budget"
    );
    for r in &rows {
        println!(
            "{:<34} {:>10.1} {:>10.1} {:>10}",
            r.stage,
            r.ns,
            r.cpu,
            r.budget.map_or("-".into(), |b| format!("{b:.0}"))
        );
    }
    println!(
        "{:<34} {:>10.1} {:>10.1} {:>10}",
        "sum (known series, wal at 8)", total, total_cpu, "600"
    );
}
