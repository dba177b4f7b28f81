//! A first end-to-end figure: durable points per second through HTTP, 50,000-point
//! line-protocol requests (10,000 series, 5 float fields), server in this process, closed-loop
//! clients on the same machine. The open-model ramp and the knee are `sluice-load`'s job; this
//! is the quick check that the stages add up.
//!
//! Run: `cargo bench -p sluice-server --bench http_e2e` (`-- --quick` for a short run,
//! `-- --clients N --seconds S` to change the load).

#[path = "stages.rs"]
#[allow(dead_code)]
mod stages;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::config::ServerConfig;
use sluice_server::app::App;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cpu_seconds() -> f64 {
    // utime + stime of this process, from /proc (ticks of 1/100 s).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let clients = arg("--clients", 4) as usize;
    let seconds = arg("--seconds", if quick { 5 } else { 20 });
    let dir = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let cfg = ServerConfig {
        listen: format!("127.0.0.1:{port}"),
        data_dir: dir.path().display().to_string(),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let app = App::open(cfg).expect("open");
    app.replay().expect("replay");
    let router = sluice_server::http::router(app.clone());
    rt.spawn(async move {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        axum::serve(l, router).await.expect("serve");
    });
    std::thread::sleep(Duration::from_millis(200));

    // Pre-encoded bodies with distinct timestamps, so clients cost only the send.
    let bodies: Arc<Vec<String>> = Arc::new(
        (0..16)
            .map(|i| {
                stages::body(
                    50_000,
                    10_000,
                    1_700_000_000_000_000_000 + i * 10_000_000_000,
                )
            })
            .collect(),
    );
    let url = format!("http://127.0.0.1:{port}/write?db=bench");
    let points = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let cpu0 = cpu_seconds();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (bodies, url, points, latencies) = (
                bodies.clone(),
                url.clone(),
                points.clone(),
                latencies.clone(),
            );
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new().build();
                let mut i = c;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let r = agent.post(&url).send_string(&bodies[i % bodies.len()]);
                    match r {
                        Ok(resp) if resp.status() == 204 => {
                            points.fetch_add(50_000, Ordering::Relaxed);
                            latencies.lock().unwrap().push(t.elapsed());
                        }
                        Ok(resp) => eprintln!("status {}", resp.status()),
                        Err(ureq::Error::Status(503, _)) => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => eprintln!("{e}"),
                    }
                    i += clients;
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let acked = points.load(Ordering::Relaxed);
    let flush_started = Instant::now();
    app.scheduler.drain();
    app.scheduler.wait_empty(Duration::from_secs(300));
    let flush_tail = flush_started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!("\nend to end through HTTP: {clients} closed-loop clients, {seconds}s, 50,000-point requests");
    println!(
        "acknowledged (durable) points/s   {:>12.0}",
        acked as f64 / elapsed
    );
    println!(
        "flushed points/s (incl. tail)    {:>12.0}",
        acked as f64 / (elapsed + flush_tail)
    );
    println!(
        "request latency p50 / p95 / max  {:>8.1} / {:.1} / {:.1} ms",
        pct(0.5),
        pct(0.95),
        pct(1.0)
    );
    println!(
        "process CPU per point            {:>12.0} ns (server and clients together)",
        cpu * 1e9 / acked.max(1) as f64
    );
    app.shutdown(Duration::from_secs(60));
}
