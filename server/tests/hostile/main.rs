//! Hostile requests against the real server, one class at a time: each is answered with the
//! error that names its problem, the process stays up with bounded memory growth, and a
//! canary written before is intact afterwards.

#[path = "../common/mod.rs"]
mod common;
mod queries;
mod tables;
mod writes;

use std::io::Write;
use std::time::Duration;

use common::Server;

pub const MIB: u64 = 1 << 20;

pub fn urlencode(q: &str) -> String {
    serde_urlencoded::to_string([("q", q)])
        .expect("encode")
        .trim_start_matches("q=")
        .to_string()
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

/// A server with nothing pre-touched, so that resident memory shows what requests cost.
pub fn server(extra: &[(&str, &str)]) -> Server {
    let mut env = vec![("SLUICE_LIMITS_PRETOUCH_BYTES", "0")];
    env.extend_from_slice(extra);
    let mut s = Server::start(&env);
    s.wait_ready(Duration::from_secs(120));
    assert_eq!(
        s.write("db=canary", "canary,host=a v=1 1\ncanary,host=b v=2 2")
            .status,
        204
    );
    s.wait_sql("SELECT sum(v) FROM canary_autogen_canary", "3");
    s
}

/// After a hostile request: still up, memory grew less than `max_growth` over `before`, and
/// the canary reads back unchanged.
pub fn survived(s: &Server, before: u64, max_growth: u64, what: &str) {
    assert!(s.is_up(), "{what}: the server went down\n{}", s.log_tail());
    let rss = s.rss();
    assert!(
        rss < before + max_growth,
        "{what}: resident memory grew from {} MiB to {} MiB",
        before / MIB,
        rss / MIB
    );
    s.wait_sql("SELECT sum(v) FROM canary_autogen_canary", "3");
}

/// The value of an unlabelled metric in a `/metrics` text.
pub fn metric(metrics: &str, name: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
