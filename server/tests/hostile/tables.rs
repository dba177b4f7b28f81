//! Tables whose policy changes or whose inserts fail.

use std::time::{Duration, Instant};

use crate::common::Server;
use crate::server;

#[test]
fn a_changed_retention_policy_reaches_existing_tables_and_expires_rows() {
    let dir = tempfile::tempdir().expect("dir");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let mut s = Server::start_in(
        dir.path(),
        &[
            ("SLUICE_DATABASES", "r:keep=30d*"),
            ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ],
    );
    s.wait_ready(Duration::from_secs(120));
    let body = format!("m v=1 {}\nm v=2 {}", now - 7200, now - 60);
    assert_eq!(s.write("db=r&precision=s", &body).status, 204);
    s.wait_sql("SELECT count() FROM r_keep_m", "2");
    s.kill();
    drop(s);
    let mut s = Server::start_in(
        dir.path(),
        &[
            ("SLUICE_DATABASES", "r:keep=1h*"),
            ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ],
    );
    s.wait_ready(Duration::from_secs(120));
    let ttl = s.sql("SELECT extract(create_table_query, ' TTL (.+?) SETTINGS ') FROM system.tables WHERE name = 'r_keep_m' FORMAT TSV");
    assert_eq!(ttl.trim(), "toDateTime(time) + toIntervalSecond(3600)");
    // The row older than an hour goes without another restart; the other stays.
    s.wait_sql("SELECT count() FROM r_keep_m", "1");
    s.wait_sql("SELECT sum(v) FROM r_keep_m", "2");
}

/// A table whose inserts fail for a reason the write could not know (its directory cannot be
/// written: `chattr +i`, which stops root too) is isolated: its points are acknowledged and
/// wait in the WAL, another table keeps flushing, `/ready` and the metrics name it, and once the
/// directory is writable again every point lands.
#[test]
fn a_table_whose_inserts_fail_is_isolated_and_catches_up() {
    let s = server(&[]);
    assert_eq!(s.write("db=f", "bad v=1 1\ngood v=1 1").status, 204);
    s.wait_sql("SELECT count() FROM f_autogen_bad", "1");
    s.wait_sql("SELECT count() FROM f_autogen_good", "1");
    let dir = s
        .sql("SELECT arrayJoin(data_paths) FROM system.tables WHERE name = 'f_autogen_bad' FORMAT TSV")
        .trim()
        .to_string();
    assert!(!dir.is_empty(), "no data path for f_autogen_bad");
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .args([flag, &dir])
            .status()
            .map(|st| st.success())
            .unwrap_or(false)
    };
    if !chattr("+i") {
        eprintln!("SKIPPED: chattr +i {dir} is not possible here (no chattr, or a file system without it)");
        return;
    }
    let unlock = scopeguard(|| {
        chattr("-i");
    });
    for i in 2..=4 {
        let body = format!("bad v={i} {i}\ngood v={i} {i}");
        assert_eq!(s.write("db=f", &body).status, 204, "acknowledged");
    }
    s.wait_sql("SELECT count() FROM f_autogen_good", "4");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = s.request("GET", "/ready", &[], b"");
        let metrics = s.request("GET", "/metrics", &[], b"").body;
        if ready.status == 200
            && ready.body.contains("f_autogen_bad")
            && metrics.contains("sluice_flush_failing_tables 1")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/ready: {} {}\nmetrics: {}",
            ready.status,
            ready.body,
            metrics
                .lines()
                .filter(|l| l.contains("failing") || l.contains("flush_failures"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        s.sql("SELECT count() FROM f_autogen_bad FORMAT TSV").trim(),
        "1"
    );
    drop(unlock);
    // The retry backoff is at most a few seconds after so short an outage.
    s.wait_sql("SELECT count() FROM f_autogen_bad", "4");
    s.wait_sql("SELECT sum(v) FROM f_autogen_bad", "10");
    let ready = s.request("GET", "/ready", &[], b"");
    assert!(
        ready.body.contains("\"failing_tables\":[]"),
        "{}",
        ready.body
    );
}

/// Runs `f` when dropped (also when the test panics), so a directory is never left immutable.
fn scopeguard<F: FnMut()>(f: F) -> impl Drop {
    struct Guard<F: FnMut()>(F);
    impl<F: FnMut()> Drop for Guard<F> {
        fn drop(&mut self) {
            (self.0)();
        }
    }
    Guard(f)
}
