//! The tenant's pods change faster than their peer files: the kubelet refreshes a mounted
//! ConfigMap about once a minute. With real server processes on 127.0.0.1 whose peer files
//! are never refreshed: a pod that starts tells the running pods it joins before it reports
//! ready, so a read through any of them counts its points at once; a decommissioned pod tells
//! them it leaves once it has handed everything over, so after it stops their reads neither
//! fail nor miss a point; and a pod brought back joins again.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::tenant::TOKEN;
use common::{any_free_port, Server};
use serde_json::Value;

fn auth() -> String {
    format!("Bearer {TOKEN}")
}

fn peer_file(dir: &std::path::Path, name: &str, peers: &[String]) -> String {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).expect("peer file");
    writeln!(f, "{}", peers.join("\n")).expect("write peer file");
    path.display().to_string()
}

fn start(listen: &str, peers_file: &str) -> Server {
    Server::start_at(
        listen,
        &[
            ("SLUICE_CLUSTER_PEERS_FILE", peers_file),
            ("SLUICE_CLUSTER_TOKEN", TOKEN),
        ],
    )
}

/// `SELECT count("v")` of `m` through `pod` (gathering from the pods it knows): the count, or
/// the statement's error.
fn count(pod: &Server, m: &str) -> Result<u64, String> {
    let q = serde_urlencoded::to_string([
        ("db", "s"),
        ("q", &format!("SELECT count(\"v\") FROM \"{m}\"")),
    ])
    .expect("query");
    let r = pod.request("GET", &format!("/query?{q}"), &[], b"");
    let v: Value = serde_json::from_str(&r.body).map_err(|e| format!("{e}: {}", r.body))?;
    let res = &v["results"][0];
    if let Some(e) = res["error"].as_str().or(v["error"].as_str()) {
        return Err(e.to_string());
    }
    Ok(res["series"][0]["values"][0][1].as_u64().unwrap_or(0))
}

/// Waits (up to 20 s, for the flush) until a read through `pod` counts `want`; a count above
/// it, or an error, fails at once.
fn wait_count(pod: &Server, m: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match count(pod, m) {
            Ok(n) if n == want => return,
            Ok(n) if n < want && Instant::now() < deadline => {}
            got => panic!(
                "count of {m} through {}: {got:?}, want {want}\n{}",
                pod.url,
                pod.log_tail()
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write(pod: &Server, m: &str, n: u64, from: u64) {
    let body: String = (from..from + n)
        .map(|i| {
            format!(
                "{m},host=h{} v={i} {}\n",
                i % 7,
                1_700_000_000_000_000_000u64 + i
            )
        })
        .collect();
    let w = pod.write("db=s", &body);
    assert_eq!(w.status, 204, "{}", w.body);
}

fn phase(pod: &Server) -> String {
    let r = pod.request("GET", "/decommission", &[("Authorization", &auth())], b"");
    let v: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
    v["phase"].as_str().unwrap_or_default().to_string()
}

fn wait_phase(pod: &Server, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while phase(pod) != want {
        assert!(
            Instant::now() < deadline,
            "phase {want} not reached: {}\n{}",
            phase(pod),
            pod.log_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pods_that_join_are_read_at_once_and_pods_that_leave_are_not_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", any_free_port()))
        .collect();
    // Two pods whose peer file names the two of them, and is never refreshed.
    let two = peer_file(dir.path(), "two", &addrs[..2]);
    let three = peer_file(dir.path(), "three", &addrs);
    let p0 = start(&addrs[0], &two);
    let p1 = start(&addrs[1], &two);
    write(&p0, "cpu", 100, 0);
    write(&p1, "cpu", 200, 100);
    wait_count(&p0, "cpu", 300);
    // Only the tenant's pods announce, one pod at a time.
    let path = format!("/internal/v1/peers?join={}", addrs[2]);
    let r = p0.request("POST", &path, &[], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    let r = p0.request(
        "POST",
        "/internal/v1/peers?join=127.0.0.1:1&leave=127.0.0.1:2",
        &[("Authorization", &auth())],
        b"",
    );
    assert_eq!(r.status, 400, "{}", r.body);
    wait_count(&p0, "cpu", 300);

    // A third pod starts with a peer file naming all three: once it is ready, reads through
    // the two others count what it holds, whatever their files say.
    let mut p2 = start(&addrs[2], &three);
    write(&p2, "cpu", 400, 300);
    for p in [&p0, &p1, &p2] {
        wait_count(p, "cpu", 700);
    }
    // A measurement only the new pod holds is in the others' catalogs too.
    write(&p2, "new", 5, 0);
    for p in [&p0, &p1, &p2] {
        wait_count(p, "new", 5);
    }

    // It leaves: it hands everything to pod 0 and, once empty, stops. Reads through the two
    // others neither fail on it nor miss a point.
    let r = p2.request(
        "POST",
        &format!("/decommission?to={}", addrs[0]),
        &[("Authorization", &auth())],
        b"",
    );
    assert_eq!(r.status, 202, "{}", r.body);
    wait_phase(&p2, "empty");
    assert!(p2.terminate().success(), "{}", p2.log_tail());
    for p in [&p0, &p1] {
        assert_eq!(count(p, "cpu"), Ok(700), "through {}", p.url);
        assert_eq!(count(p, "new"), Ok(5), "through {}", p.url);
    }

    // Brought back on its emptied volume (a scale-up after the scale-down), it joins again:
    // what it takes now is counted through the others at once.
    // It comes back still decommissioned (not ready) until its decommission is cancelled, as
    // the operator does.
    p2.respawn();
    wait_phase(&p2, "empty");
    let r = p2.request(
        "DELETE",
        "/decommission",
        &[("Authorization", &auth())],
        b"",
    );
    assert!(r.status == 200 || r.status == 202, "{}", r.body);
    wait_phase(&p2, "none");
    p2.wait_ready(Duration::from_secs(60));
    write(&p2, "cpu", 50, 700);
    for p in [&p0, &p1, &p2] {
        wait_count(p, "cpu", 750);
    }
}
