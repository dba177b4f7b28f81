//! `holt_winters()` answers the same forecast from three pods as from one pod holding every
//! point. Its model is fitted to the buckets' means, and a fit can turn a mean that differs
//! in its last bit into another forecast altogether: summed per pod and then across pods,
//! four hosts' means of 12 hours per minute differed from one pod's in the last bit in about
//! 40 % of their buckets, and one host's forecast came out 10 % apart (bench/README, "the
//! forecast across pods"). So the means and sums a forecast is fitted to add their points in
//! time order wherever they are ([`plan::Source::ordered_sums`]), and the forecasts must be
//! equal here to the last bit.

mod common;

use std::time::{Duration, Instant};

use common::tenant::Tenant;
use common::Server;
use serde_json::Value;

/// 12 hours of one point every 10 s for each host, values in steps of 0.01 as the query
/// benchmark writes them; point `k` goes to pod `k % 3`.
const HOSTS: u64 = 4;
const POINTS: u64 = 12 * 360;
const T0: u64 = 1_700_000_000;

fn lines(host: u64, pod: Option<u64>) -> String {
    (0..POINTS)
        .filter(|k| pod.is_none_or(|p| k % 3 == p))
        .map(|k| {
            let t = T0 + 10 * k;
            let v = ((host * 7919 + t * 31) % 10_000) as f64 / 100.0;
            format!("cpu,host=host_{host} usage={v} {t}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn answer(pod: &Server, q: &str) -> Value {
    let path = format!(
        "/query?db=f&epoch=s&{}",
        serde_urlencoded::to_string([("q", q)]).expect("encode")
    );
    let r = pod.request("GET", &path, &[], b"");
    assert_eq!(r.status, 200, "{q}: {}", r.body);
    serde_json::from_str(r.body.trim()).expect("JSON")
}

fn count(pod: &Server) -> Option<u64> {
    answer(pod, "SELECT count(usage) FROM cpu")["results"][0]["series"][0]["values"][0][1].as_u64()
}

#[test]
fn a_forecast_from_three_pods_is_one_pods_to_the_last_bit() {
    let one = Server::start(&[]);
    let tenant = Tenant::start(3, &[]);
    for host in 0..HOSTS {
        let w = one.write("db=f&precision=s", &lines(host, None));
        assert_eq!(w.status, 204, "{}", w.body);
        for (p, pod) in tenant.pods.iter().enumerate() {
            let w = pod.write("db=f&precision=s", &lines(host, Some(p as u64)));
            assert_eq!(w.status, 204, "{}", w.body);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&one) != Some(HOSTS * POINTS) || count(&tenant.pods[0]) != Some(HOSTS * POINTS) {
        assert!(Instant::now() < deadline, "the points were not all flushed");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (lo, hi) = (T0, T0 + 10 * POINTS);
    let range = format!("time >= {lo}s AND time < {hi}s");
    let mut checked = 0;
    for q in [
        format!("SELECT holt_winters(mean(usage), 10, 2) FROM cpu WHERE {range} GROUP BY time(1m), host"),
        format!("SELECT holt_winters_with_fit(sum(usage), 5, 4) FROM cpu WHERE {range} GROUP BY time(5m), host"),
        format!("SELECT holt_winters(mean(usage), 10, 2) FROM cpu WHERE {range} GROUP BY time(1m)"),
    ] {
        let want = answer(&one, &q);
        for pod in &tenant.pods {
            let got = answer(pod, &q);
            assert_eq!(got, want, "{q}");
            checked += 1;
        }
        let series = want["results"][0]["series"].as_array().map_or(0, Vec::len);
        assert!(series > 0, "{q}: no forecast: {want}");
    }
    assert_eq!(checked, 9);
}
