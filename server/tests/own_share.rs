//! A gathering pod computes its own share of a read within its gathering query, and answers
//! its own series version without asking itself over HTTP, once it knows which of the
//! tenant's addresses is its own: with real server processes that listen on every address
//! (as pods do), so each must learn its address from a peer's answer carrying its boot id.

mod common;

use std::time::{Duration, Instant};

use common::tenant::{read_retries, write_doubling, TOKEN};
use common::Server;
use serde_json::Value;

fn query(pod: &Server, q: &str) -> Value {
    let path = format!(
        "/query?db=g&{}",
        serde_urlencoded::to_string([("q", q)]).expect("encode")
    );
    let r = pod.request("GET", &path, &[], b"");
    assert_eq!(r.status, 200, "{q}: {}", r.body);
    serde_json::from_str(r.body.trim()).expect("JSON")
}

/// The internal endpoint's answered requests so far (`http_requests_total`).
fn shares_answered(pod: &Server) -> u64 {
    let metrics = pod.request("GET", "/metrics", &[], b"").body;
    metrics
        .lines()
        .filter(|l| l.contains("http_requests_total{") && l.contains("endpoint=\"partial\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Three servers that know each other as 127.0.0.1:<port>, listening on `host`:<port>,
/// pod 0 with `pod0` added to its environment; and their names.
fn three_pods(host: &str, pod0: &[(&str, &str)]) -> (Vec<Server>, Vec<String>) {
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let names: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let peers = names.join(",");
    let env = [
        ("SLUICE_CLUSTER_PEERS", peers.as_str()),
        ("SLUICE_CLUSTER_TOKEN", TOKEN),
    ];
    let mut first = env.to_vec();
    first.extend_from_slice(pod0);
    let pods = ports
        .iter()
        .enumerate()
        .map(|(i, p)| Server::start_at(&format!("{host}:{p}"), if i == 0 { &first } else { &env }))
        .collect();
    (pods, names)
}

#[test]
fn a_pod_listening_on_every_address_reads_its_own_share_in_place() {
    let (pods, _) = three_pods("0.0.0.0", &[]);
    let counts = write_doubling(&pods);
    let expected: u64 = counts.iter().sum();
    let sum: u64 = counts.iter().map(|n| n * (n - 1) / 2).sum();
    let count = "SELECT count(value), sum(value) FROM cpu";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = query(&pods[0], count);
        let row = &v["results"][0]["series"][0]["values"][0];
        if row[1].as_u64() == Some(expected) {
            assert_eq!(row[2].as_f64(), Some(sum as f64), "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "counted {row} of {expected}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // It knows itself now: ten more reads through pod 0 ask each peer for its share ten
    // times, and pod 0 itself for none: only its catalog, gathered again once it is a second
    // old, so at most once a second and once more.
    // (Counts per host over all time aggregate in key order, which a share asks for on its
    // own connection: this one is bucketed.)
    let per_host = "SELECT count(value) FROM cpu WHERE time >= 1599998400s AND time < 1600002000s GROUP BY time(1h), host";
    let before: Vec<u64> = pods.iter().map(shares_answered).collect();
    let reads = 10;
    let started = Instant::now();
    for _ in 0..reads {
        let v = query(&pods[0], per_host);
        let series = v["results"][0]["series"].as_array().expect("series");
        let counts: Vec<u64> = series
            .iter()
            .filter_map(|s| s["values"][0][1].as_u64())
            .collect();
        assert_eq!(counts, vec![10, 20, 40], "{v}");
    }
    let after: Vec<u64> = pods.iter().map(shares_answered).collect();
    let catalogs = started.elapsed().as_secs() + 2;
    for i in 1..3 {
        assert!(
            after[i] - before[i] >= reads,
            "pod {i} answered {} shares for {reads} reads",
            after[i] - before[i]
        );
    }
    assert!(
        after[0] - before[0] <= catalogs.min(reads - 1),
        "pod 0 answered {} requests of its own reads: its share went over HTTP",
        after[0] - before[0]
    );

    // `SHOW` answers kept while no pod's series changed: pod 0 asks its peers' versions, not
    // its own.
    query(&pods[0], "SHOW TAG KEYS FROM cpu");
    let before = shares_answered(&pods[0]);
    let started = Instant::now();
    for _ in 0..reads {
        let v = query(&pods[0], "SHOW TAG KEYS FROM cpu");
        assert_eq!(
            v["results"][0]["series"][0]["values"],
            serde_json::json!([["host"]]),
            "{v}"
        );
    }
    let asked = shares_answered(&pods[0]) - before;
    let catalogs = started.elapsed().as_secs() + 2;
    assert!(
        asked <= catalogs.min(reads - 1),
        "pod 0 answered {asked} requests of its own SHOW reads"
    );
}

/// A share computed in place that fails without naming a pod is read again with this pod's
/// share over `url()`, like a peer's, so that the error names the pod whose share failed
/// (and a share that ran out of memory gets the endpoint's retry on one thread). Here pod 0
/// may read at most 100 rows (`query.max_rows_to_read`) and holds 500 of the measurement:
/// its share fails in place, then again at its endpoint, which names it.
#[test]
fn a_share_that_fails_in_place_is_read_again_over_url_and_its_pod_named() {
    let (pods, addrs) = three_pods("127.0.0.1", &[("SLUICE_QUERY_MAX_ROWS_TO_READ", "100")]);
    for (i, pod) in pods.iter().enumerate() {
        let n = if i == 0 { 500 } else { 5 };
        let body: Vec<String> = (0..n)
            .map(|k| format!("cpu,host=p{i} value={k} {}", 1_600_000_000 + k))
            .collect();
        let w = pod.write("db=g&precision=s", &body.join("\n"));
        assert_eq!(w.status, 204, "{}", w.body);
    }
    let per_host = "SELECT count(value) FROM cpu WHERE time >= 1599998400s AND time < 1600002000s GROUP BY time(1h), host";

    // Pod 1 reads pod 0 over `url()`: its endpoint refuses the share and is named.
    let deadline = Instant::now() + Duration::from_secs(30);
    let error = |pod: &Server| {
        let v = query(pod, per_host);
        v["results"][0]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    loop {
        let err = error(&pods[1]);
        if err.contains("max_rows_to_read") || err.contains("TOO_MANY_ROWS") {
            assert!(err.contains(&addrs[0]), "{err}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pod 1 read pod 0's 500 rows: {err}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Pod 0 computes its share in place (it listens on its own address), which fails with
    // the engine's limit alone; read again over `url()`, its endpoint answers the share
    // with an error that names it.
    let before = shares_answered(&pods[0]);
    let err = error(&pods[0]);
    assert!(
        err.contains("answered with an error") && err.contains(&addrs[0]),
        "pod 0's own failed share is not named: {err}"
    );
    assert!(
        shares_answered(&pods[0]) > before,
        "pod 0 did not read its own share again over url()"
    );
    assert!(
        read_retries(&pods[0], "own_share") > 0,
        "read_retries_total{{reason=\"own_share\"}} did not count it"
    );
}
