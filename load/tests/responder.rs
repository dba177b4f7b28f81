//! The generator against a programmable HTTP responder written here: a server with a fixed
//! number of workers and a fixed service time has a known capacity, so the knee the generator
//! reports, its drop accounting, its error accounting and its reconnects can be checked
//! exactly. (The client is what is under test; the responder is the instrument.)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use sluice_load::http::{parse_url, Api, WriteParams};
use sluice_load::knee::Criteria;
use sluice_load::payload::{Format, PayloadSpec, Precision};
use sluice_load::{run, LoadConfig, Plan};

struct Responder {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    lines: Arc<AtomicU64>,
    first_head: Arc<Mutex<Option<String>>>,
}

#[derive(Clone, Copy)]
struct Behaviour {
    /// Requests served at once.
    workers: usize,
    /// Time each takes.
    service: Duration,
    /// Every k-th request gets a chunked 503 and the connection is closed.
    fail_every: Option<u64>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn serve(mut sock: TcpStream, b: Behaviour, sem: Arc<Semaphore>, r: Arc<Responder>) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        let lines = buf[head_end..head_end + len]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        buf.drain(..head_end + len);
        r.lines.fetch_add(lines as u64, Relaxed);
        r.first_head
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(head);
        let n = r.requests.fetch_add(1, Relaxed) + 1;
        {
            let _permit = sem.acquire().await;
            tokio::time::sleep(b.service).await;
        }
        if b.fail_every.is_some_and(|k| n % k == 0) {
            let _ = sock
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nRetry-After: 1\r\n\r\n5\r\nbusy!\r\n0\r\n\r\n")
                .await;
            return;
        }
        if sock
            .write_all(b"HTTP/1.1 204 No Content\r\nX-Influxdb-Version: test\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn responder(b: Behaviour) -> Arc<Responder> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let r = Arc::new(Responder {
        addr: listener.local_addr().expect("addr"),
        requests: Arc::new(AtomicU64::new(0)),
        lines: Arc::new(AtomicU64::new(0)),
        first_head: Arc::new(Mutex::new(None)),
    });
    let sem = Arc::new(Semaphore::new(b.workers));
    let r2 = r.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            tokio::spawn(serve(sock, b, sem.clone(), r2.clone()));
        }
    });
    r
}

fn config(addr: SocketAddr, points: usize, plan: Plan) -> LoadConfig {
    LoadConfig {
        target: parse_url(&format!("http://{addr}")).expect("url"),
        params: WriteParams {
            api: Api::V1,
            db: "test".into(),
            rp: String::new(),
            org: String::new(),
            precision: Precision::Ns,
            token: Some("tok".into()),
            user: None,
        },
        payload: PayloadSpec::new(Format::LineProtocol, points, 50, 2),
        gzip_pool: None,
        connections: 8,
        spread: false,
        timeout: Duration::from_secs(5),
        tolerance: Duration::from_millis(5),
        warmup: Duration::ZERO,
        progress: false,
        plan,
        criteria: Criteria::default(),
    }
}

/// Two workers at 1/35 s each: 70 requests/s = 7,000 points/s with 100-point requests.
async fn seven_thousand_points_a_second() -> Arc<Responder> {
    responder(Behaviour {
        workers: 2,
        service: Duration::from_micros(28_571),
        fail_every: None,
    })
    .await
}

/// The 7,000 points/s responder.
/// Ramping 2k, 4k, 6k, 8k, ... points/s, the knee must be 6k (4k tolerated: one step), every
/// step above capacity must show drops, and the ramp must stop soon after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_the_knee_of_a_capacity_limited_server() {
    let r = seven_thousand_points_a_second().await;
    let rates: Vec<f64> = (1..=7).map(|i| i as f64 * 2000.0 / 100.0).collect();
    let cfg = config(
        r.addr,
        100,
        Plan::Open {
            rates_rps: rates,
            step: Duration::from_millis(1500),
            ramp: true,
        },
    );
    let report = run(&cfg, |s| eprintln!("{}", sluice_load::report::table_row(s)))
        .await
        .expect("run");
    eprintln!("{}", report.summary());
    let knee = report.knee_pps.expect("a knee");
    assert!(
        knee == 6000.0 || knee == 4000.0,
        "knee {knee}, expected 6000 within a step"
    );
    for s in &report.steps {
        if s.offered_pps > 7000.0 {
            assert!(
                s.dropped > 0,
                "step {} above capacity without drops",
                s.step
            );
            assert_eq!(s.pass, Some(false));
            assert!(s.achieved_pps < 7300.0, "achieved {}", s.achieved_pps);
        } else {
            assert_eq!(s.errors, 0);
        }
    }
    assert!(report.stopped_early, "ramp should stop after failing steps");
    assert!(report.steps.len() <= 6);
    // What was acknowledged reached the responder, point by point.
    let ok_points: u64 = report.steps.iter().map(|s| s.ok * 100).sum();
    assert_eq!(r.lines.load(Relaxed), ok_points);
    let head = r
        .first_head
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default();
    assert!(
        head.starts_with("POST /write?db=test&precision=ns HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("Authorization: Token tok\r\n"), "{head}");
}

/// The knee search on the same 7,000 points/s responder, not told its range: doubling from
/// 1,000 points/s (1k, 2k, 4k pass; 8k fails), then four steps between 4k and 8k (4.8k,
/// 5.6k and 6.4k pass, 7.2k is past capacity), then the highest passing rate once more: the
/// knee is 6,400 (5,600 tolerated), found in at most 9 steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_the_knee_without_being_told_where() {
    let r = seven_thousand_points_a_second().await;
    let cfg = config(
        r.addr,
        100,
        Plan::Search {
            search: sluice_load::search::Search {
                start: 1000.0 / 100.0,
                max: 1e6,
                refine: 4,
                growth: 2.0,
                confirm: 1,
            },
            step: Duration::from_millis(1500),
            settle: Duration::from_millis(200),
        },
    );
    let report = run(&cfg, |s| eprintln!("{}", sluice_load::report::table_row(s)))
        .await
        .expect("run");
    eprintln!("{}", report.summary());
    assert_eq!(report.mode, "search");
    let offered: Vec<f64> = report.steps.iter().map(|s| s.offered_pps.round()).collect();
    assert_eq!(
        &offered[..4],
        &[1000.0, 2000.0, 4000.0, 8000.0],
        "{offered:?}"
    );
    assert!(report.steps.len() <= 9, "{offered:?}");
    let knee = report.knee_pps.expect("a knee").round();
    assert!(knee == 6400.0 || knee == 5600.0, "knee {knee}");
    // The last step ran a rate that had passed before again, at or above the knee.
    let (last, before) = offered.split_last().expect("steps");
    assert!(*last >= knee && before.contains(last), "{offered:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&report.compact_json(4096)).expect("summary JSON");
    assert_eq!(summary["knee_pps"], knee);
    assert_eq!(
        summary["steps"].as_array().map(Vec::len),
        Some(report.steps.len())
    );
}

/// Every third request gets a chunked 503 with `Connection: close`: errors are counted by
/// status with the body as sample, the connection is re-established, nothing is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_errors_by_status_and_reconnects() {
    let r = responder(Behaviour {
        workers: 8,
        service: Duration::from_millis(1),
        fail_every: Some(3),
    })
    .await;
    let cfg = config(
        r.addr,
        10,
        Plan::Open {
            rates_rps: vec![60.0],
            step: Duration::from_secs(1),
            ramp: false,
        },
    );
    let report = run(&cfg, |_| {}).await.expect("run");
    let s = &report.steps[0];
    assert_eq!(s.requests, 60);
    assert_eq!(s.dropped, 0);
    assert_eq!(
        s.errors_by_status.get("503"),
        Some(&20),
        "{:?}",
        s.errors_by_status
    );
    assert_eq!(s.errors, 20, "{:?}", s.errors_by_status);
    assert_eq!(s.ok, 40);
    assert_eq!(
        s.error_samples.get("503").map(String::as_str),
        Some("busy!")
    );
    assert_eq!(s.achieved_pps, 400.0);
    assert_eq!(r.requests.load(Relaxed), 60);
}

/// Closed model: two users back to back against a 10 ms server do about 200 requests/s, and
/// a closed model never drops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_model_is_paced_by_latency() {
    let r = responder(Behaviour {
        workers: 8,
        service: Duration::from_millis(10),
        fail_every: None,
    })
    .await;
    let cfg = config(
        r.addr,
        10,
        Plan::Closed {
            vus: vec![2],
            step: Duration::from_secs(1),
        },
    );
    let report = run(&cfg, |_| {}).await.expect("run");
    let s = &report.steps[0];
    assert_eq!(s.dropped, 0);
    assert_eq!(s.errors, 0);
    assert!(
        (80.0..=205.0).contains(&s.achieved_rps),
        "{}",
        s.achieved_rps
    );
    assert_eq!(s.offered_pps, s.achieved_pps);
    assert!(s.p50_ms.is_some_and(|v| v >= 10.0));
    assert_eq!(report.knee_pps, None);
}

/// msgpack and gzip bodies go out with the right headers, and an unreachable target is an
/// error naming the address rather than a run full of failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msgpack_gzip_and_unreachable_target() {
    let r = responder(Behaviour {
        workers: 4,
        service: Duration::from_millis(1),
        fail_every: None,
    })
    .await;
    let mut cfg = config(
        r.addr,
        20,
        Plan::Open {
            rates_rps: vec![20.0],
            step: Duration::from_millis(500),
            ramp: false,
        },
    );
    cfg.payload.format = Format::Msgpack;
    cfg.gzip_pool = Some(4);
    let report = run(&cfg, |_| {}).await.expect("run");
    assert_eq!(report.steps[0].ok, 10);
    let head = r
        .first_head
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default();
    assert!(
        head.contains("Content-Type: application/msgpack\r\n"),
        "{head}"
    );
    assert!(head.contains("Content-Encoding: gzip\r\n"), "{head}");

    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = closed.local_addr().expect("addr");
    drop(closed);
    let cfg = config(
        addr,
        10,
        Plan::Open {
            rates_rps: vec![10.0],
            step: Duration::from_millis(100),
            ramp: false,
        },
    );
    let err = run(&cfg, |_| {}).await.expect_err("must fail");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

/// The binary: flags in, table out, `--json` with the agreed keys, `--plot` an SVG; a bad
/// flag is a message and a non-zero exit, not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_writes_json_and_svg() {
    let r = responder(Behaviour {
        workers: 4,
        service: Duration::from_millis(2),
        fail_every: None,
    })
    .await;
    let dir = std::env::temp_dir().join(format!("sluice-load-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (json, svg) = (dir.join("r.json"), dir.join("r.svg"));
    let url = format!("http://{}", r.addr);
    let args: Vec<String> = [
        "--url",
        &url,
        "--ramp",
        "1k:1k:2k",
        "--points",
        "100",
        "--series",
        "10",
        "--step",
        "500ms",
        "--connections",
        "4",
        "--quiet",
        "--json",
        json.to_str().unwrap_or(""),
        "--plot",
        svg.to_str().unwrap_or(""),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice-load"))
            .args(&args)
            .output()
    })
    .await
    .expect("join")
    .expect("spawn");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("offered/s") && stdout.contains("knee:"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    assert_eq!(v["steps"].as_array().map(Vec::len), Some(2));
    for key in [
        "offered_pps",
        "achieved_pps",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "dropped",
        "errors",
    ] {
        assert!(v["steps"][0].get(key).is_some(), "{key}");
    }
    assert!(v.get("knee_pps").is_some());
    assert_eq!(v["steps"][1]["offered_pps"], 2000.0);
    let plot = std::fs::read_to_string(&svg).expect("svg");
    assert!(plot.starts_with("<svg") && plot.trim_end().ends_with("</svg>"));

    let bad = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice-load"))
            .args(["--url", "https://x", "--rate", "1k"])
            .output()
    })
    .await
    .expect("join")
    .expect("spawn");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("only http://"));
    let _ = std::fs::remove_dir_all(&dir);
}
