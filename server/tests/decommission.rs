//! `/decommission` on a real server: a pod that is leaving refuses new writes (503, `Retry-After`,
//! connection closed), is not ready, flushes every acknowledged point into its tables, says so,
//! and takes writes again when the decommission is cancelled.

mod common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::Value;

const TOKEN: &str = "tenant-secret";

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or(Value::String(body.to_string()))
}

#[test]
fn a_decommissioned_pod_refuses_writes_flushes_everything_and_can_be_cancelled() {
    let server = Server::start(&[
        ("SLUICE_CLUSTER_TOKEN", TOKEN),
        ("SLUICE_POOL_FLUSH_INTERVAL", "5s"),
    ]);
    let auth = format!("Bearer {TOKEN}");
    let lines: Vec<String> = (0..20_000)
        .map(|i| {
            format!(
                "cpu,host=h{} v={i} {}",
                i % 10,
                1_700_000_000_000_000_000i64 + i
            )
        })
        .collect();
    assert_eq!(server.write("db=db", &lines.join("\n")).status, 204);

    // Only the tenant's pods (the operator) may start it.
    assert_eq!(
        server.request("POST", "/decommission", &[], b"").status,
        401
    );
    let none = server.request("GET", "/decommission", &[("Authorization", &auth)], b"");
    assert_eq!(json(&none.body)["phase"], "none");

    let started = server.request("POST", "/decommission", &[("Authorization", &auth)], b"");
    assert_eq!(started.status, 202, "{}", started.body);
    // Idempotent: a second start changes nothing.
    let again = server.request("POST", "/decommission", &[("Authorization", &auth)], b"");
    assert_eq!(
        json(&again.body)["since_unix_seconds"],
        json(&started.body)["since_unix_seconds"]
    );

    let refused = server.write("db=db", "cpu,host=late v=1 1");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("Retry-After"), Some("1"));
    assert_eq!(refused.header("Connection"), Some("close"));
    assert!(refused.body.contains("decommissioned"), "{}", refused.body);
    let ready = server.request("GET", "/ready", &[], b"");
    assert_eq!(ready.status, 503);
    assert_eq!(json(&ready.body)["reason"], "decommissioning");

    // The flush interval is 5 s, but a decommission flushes at once.
    let deadline = Instant::now() + Duration::from_secs(4);
    let status = loop {
        let s = json(
            &server
                .request("GET", "/decommission", &[("Authorization", &auth)], b"")
                .body,
        );
        if s["phase"] == "flushed" {
            break s;
        }
        assert!(Instant::now() < deadline, "not flushed: {s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status["wal_backlog_points"], 0);
    assert_eq!(
        server
            .sql("SELECT count() FROM db_autogen_cpu FORMAT TSV")
            .trim(),
        "20000"
    );
    // Reads keep working: the data is still the tenant's.
    assert_eq!(
        server
            .request("GET", "/query?db=db&q=SHOW%20MEASUREMENTS", &[], b"")
            .status,
        200
    );

    let cancelled = server.request("DELETE", "/decommission", &[("Authorization", &auth)], b"");
    assert_eq!(json(&cancelled.body)["phase"], "none");
    assert_eq!(server.request("GET", "/ready", &[], b"").status, 200);
    assert_eq!(server.write("db=db", "cpu,host=back v=1 1").status, 204);
}
