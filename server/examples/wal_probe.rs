//! Prints the latency of individual WAL group commits of a given size, to tell steady cost
//! from stalls: `cargo run --release -p sluice-server --example wal_probe -- [MiB] [count]`.
use std::sync::Arc;
use std::time::Instant;

use sluice_server::wal::{CommitObserver, Entry, Wal};

struct NoObs;
impl CommitObserver for NoObs {
    fn group_committed(&self, _: usize, _: u64, _: f64) {}
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2.4);
    let count: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(40);
    let dir =
        std::env::var("WAL_PROBE_DIR").unwrap_or_else(|_| "/root/.cache/sluice/wal-probe".into());
    let _ = std::fs::remove_dir_all(&dir);
    let wal = Wal::open(
        std::path::Path::new(&dir),
        16,
        Box::new(|_| {}),
        Arc::new(NoObs),
    )
    .expect("wal");
    let payload = vec![7u8; (mib * 1048576.0) as usize];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let mut lat = Vec::new();
    for _ in 0..count {
        let first = wal.last_seq() + 1;
        let t = Instant::now();
        let rx = wal
            .submit(vec![Entry {
                table: "probe".into(),
                rows: 1,
                payload: payload.clone(),
                batch: None,
            }])
            .expect("submit");
        rt.block_on(rx).expect("committer").expect("commit");
        let commit = t.elapsed();
        wal.complete("probe", first, wal.last_seq())
            .expect("complete");
        lat.push((commit.as_secs_f64() * 1e3, t.elapsed().as_secs_f64() * 1e3));
    }
    for (c, total) in &lat {
        println!("commit {c:7.2} ms   commit+complete {total:7.2} ms");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
