//! Hostile requests against the real server, one class at a time: each is answered with the
//! error that names its problem, the process stays up with bounded memory growth, and a
//! canary written before is intact afterwards.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Server;

const MIB: u64 = 1 << 20;

fn urlencode(q: &str) -> String {
    serde_urlencoded::to_string([("q", q)])
        .expect("encode")
        .trim_start_matches("q=")
        .to_string()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).expect("gzip");
    enc.finish().expect("gzip")
}

/// A server with nothing pre-touched, so that resident memory shows what requests cost.
fn server(extra: &[(&str, &str)]) -> Server {
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
fn survived(s: &Server, before: u64, max_growth: u64, what: &str) {
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

#[test]
fn write_bodies_are_bounded_whatever_they_hold() {
    let s = server(&[]);

    // ~60 MiB of invalid lines, a few hundred KiB gzipped.
    let before = s.rss();
    let bad = "x\n".repeat(30 << 20);
    let body = gzip(bad.as_bytes());
    assert!(
        body.len() < 1 << 20,
        "the bomb is small: {} bytes",
        body.len()
    );
    let r = s.request(
        "POST",
        "/write?db=h",
        &[("Content-Encoding", "gzip")],
        &body,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .contains("unable to parse 'x': missing fields (line 1)"),
        "{}",
        r.body
    );
    assert!(r.body.contains("more"), "{}", r.body);
    assert!(
        r.body.len() < 4096,
        "the error report is bounded: {} bytes",
        r.body.len()
    );
    survived(&s, before, 512 * MIB, "gzip body of invalid lines");

    // Past the decompressed limit: 413 naming it.
    let huge = gzip(&vec![b'a'; 80 << 20]);
    let r = s.request(
        "POST",
        "/write?db=h",
        &[("Content-Encoding", "gzip")],
        &huge,
    );
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(
        r.body.contains("decompressed body exceeds the limit"),
        "{}",
        r.body
    );

    // Every line adds a new field: the columns would pad to lines x fields.
    let before = s.rss();
    let wide: String = (0..200_000).map(|i| format!("w f{i}=1 {i}\n")).collect();
    let r = s.write("db=h", &wide);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("max-fields limit exceeded"), "{}", r.body);
    assert!(r.body.contains("dropped=198976"), "{}", r.body);
    survived(&s, before, 512 * MIB, "a new field per line");
    s.wait_sql("SELECT count() FROM h_autogen_w", "1024");

    // One enormous line, and one of deeply repeated escapes.
    let before = s.rss();
    let big = format!("big v=\"{}\" 1", "y".repeat(40 << 20));
    assert_eq!(s.write("db=h", &big).status, 204);
    let escapes = format!("esc v=\"{}\" 1", "\\\\".repeat(1 << 20));
    let r = s.write("db=h", &escapes);
    assert_eq!(r.status, 204, "{}", r.body);
    let key = format!("k{} v=1 1", "\\,".repeat(40_000));
    let r = s.write("db=h", &key);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("max key length exceeded"), "{}", r.body);
    survived(&s, before, 512 * MIB, "enormous lines");

    // Millions of tiny valid lines.
    let before = s.rss();
    let tiny: String = (0..3_000_000)
        .map(|i| format!("t v={} {}\n", i % 10, i))
        .collect();
    assert_eq!(s.write("db=h", &tiny).status, 204);
    survived(&s, before, 768 * MIB, "millions of tiny lines");
    s.wait_sql("SELECT count() FROM h_autogen_t", "3000000");
}

#[test]
fn names_the_tables_cannot_hold_are_refused_and_the_rest_round_trip() {
    let s = server(&[]);
    let r = s.write("db=n", "cpu\0x v=1 1\ncpu v=1 1");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("NUL byte"), "{}", r.body);
    assert!(r.body.contains("dropped=1"), "{}", r.body);
    let r = s.write("db=n", "cpu f\0=2 2");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("invalid field name"), "{}", r.body);
    // Every other control character is stored and read back unchanged.
    let mut lines = String::new();
    for c in (1u8..0x20)
        .chain([0x7f])
        .filter(|c| *c != b'\n' && *c != b'\r')
    {
        lines.push_str(&format!("m{}x,h=a f{}y=1 {c}\n", c as char, c as char));
    }
    let r = s.write("db=n", &lines);
    assert_eq!(r.status, 204, "{}", r.body);
    s.wait_sql(
        "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table LIKE 'n\\\\_autogen\\\\_m%' AND name LIKE 'f%y'",
        "30",
    );
    s.wait_sql("SELECT sum(`f\\x01y`) FROM `n_autogen_m\\x01x`", "1");
    // The table with the refused line's neighbours flushes, and nothing is stuck.
    s.wait_sql("SELECT count() FROM n_autogen_cpu", "1");
    let ready = s.request("GET", "/ready", &[], b"");
    assert!(
        ready.body.contains("\"failing_tables\":[]"),
        "{}",
        ready.body
    );
}

#[test]
fn schema_growth_is_bounded() {
    let s = server(&[
        ("SLUICE_LIMITS_MAX_MEASUREMENTS_PER_DATABASE", "3"),
        ("SLUICE_LIMITS_MAX_DATABASES", "3"),
        ("SLUICE_LIMITS_MAX_TAGS_PER_SERIES", "2"),
        ("SLUICE_LIMITS_MAX_NEW_SERIES_PER_REQUEST", "100"),
    ]);
    let r = s.write("db=g", "a v=1 1\nb v=1 1\nc v=1 1\nd v=1 1");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("max-measurements limit exceeded"),
        "{}",
        r.body
    );
    assert!(r.body.contains("dropped=1"), "{}", r.body);
    let r = s.write("db=g", "a,x=1,y=2,z=3 v=1 1\na,x=1 v=2 2");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("max-tags limit exceeded"), "{}", r.body);
    // canary and g exist; one more database is allowed, the next is not.
    assert_eq!(s.write("db=g2", "a v=1 1").status, 204);
    let r = s.write("db=g3", "a v=1 1");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("max-databases limit exceeded"),
        "{}",
        r.body
    );
    let many: String = (0..500).map(|i| format!("a,host=h{i} v=1 {i}\n")).collect();
    let r = s.write("db=g", &many);
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("dropped=400"), "{}", r.body);
    assert!(
        r.body.contains("limits.max_new_series_per_request: 100"),
        "{}",
        r.body
    );
}

#[test]
fn a_series_written_to_two_databases_has_tags_in_both() {
    let s = server(&[]);
    assert_eq!(s.write("db=one", "cpu,host=a v=1 1").status, 204);
    assert_eq!(s.write("db=two", "cpu,host=a v=2 2").status, 204);
    // Again, now that the key is cached for the first database.
    assert_eq!(s.write("db=one", "cpu,host=a v=3 3").status, 204);
    assert_eq!(s.write("db=three", "cpu,host=a v=4 4").status, 204);
    s.wait_sql(
        "SELECT arrayStringConcat(groupArray(db), ',') FROM (SELECT DISTINCT db FROM sluice_series WHERE measurement = 'cpu' AND tags['host'] = 'a' ORDER BY db)",
        "one,three,two",
    );
    // A tagless measurement named like its database, in two databases: two series, two rows.
    assert_eq!(s.write("db=cpu", "cpu v=1 1").status, 204);
    assert_eq!(s.write("db=cpu", "cpu v=1 2").status, 204);
    assert_eq!(s.write("db=disk", "disk v=1 1").status, 204);
    s.wait_sql(
        "SELECT count() FROM (SELECT DISTINCT db, measurement, series_id FROM sluice_series WHERE db IN ('cpu', 'disk'))",
        "2",
    );
    s.wait_sql(
        "SELECT uniqExact(series_id) FROM disk_autogen_disk WHERE series_id IN (SELECT series_id FROM sluice_series WHERE db = 'disk' AND measurement = 'disk')",
        "1",
    );
}

#[test]
fn queries_are_bounded_and_refused_when_they_reach_outside() {
    let s = server(&[
        ("SLUICE_QUERY_TIMEOUT", "2s"),
        ("SLUICE_QUERY_MAX_MEMORY_BYTES", "64MiB"),
        ("SLUICE_QUERY_MAX_RESULT_BYTES", "8MiB"),
    ]);
    let before = s.rss();
    let post = |q: &str| s.request("POST", "/sql", &[], q.as_bytes());

    let r = post("SELECT * FROM numbers(10000000000) FORMAT JSONEachRow");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("query.max_rows_to_read"), "{}", r.body);

    let r = post("SELECT count() FROM numbers(100000000000000)");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("query.max_rows_to_read"), "{}", r.body);

    let started = Instant::now();
    let r = post("SELECT sum(cityHash64(toString(number), number * 3)) FROM numbers(1500000000)");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("query.timeout (2s)"), "{}", r.body);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    let r = post("SELECT groupArray(number) FROM numbers(100000000)");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("query.max_memory_bytes"), "{}", r.body);

    // A result larger than the limit is cut: its first chunks were streamed, then it ends.
    let r = s.request(
        "GET",
        "/sql?q=SELECT%20number%20FROM%20numbers(50000000)%20FORMAT%20TSV",
        &[],
        b"",
    );
    assert!(
        r.status == 400 && r.body.contains("query.max_result_bytes")
            || r.status == 200 && (r.body.len() as u64) < 9 * MIB,
        "{} {} bytes",
        r.status,
        r.body.len()
    );

    for q in [
        "SELECT * FROM file('/etc/passwd')",
        "SELECT file('/etc/passwd')",
        "SELECT * FROM url('http://127.0.0.1:1/x', CSV, 'a String')",
        "SELECT 1 INTO OUTFILE '/tmp/sluice-hostile'",
        "INSERT INTO canary_autogen_canary SELECT * FROM canary_autogen_canary",
        "SELECT 1 SETTINGS readonly = 0",
        // Quoted names, an alias, a no-break space and INTO OUTFILE under other roots.
        "SELECT `file`('/etc/passwd') AS x",
        "SELECT file('/etc/passwd') AS x",
        "SELECT file\u{a0}('/etc/passwd') AS x",
        "SHOW TABLES INTO OUTFILE '/tmp/sluice-hostile'",
        "EXPLAIN SYNTAX SELECT 1 INTO OUTFILE '/tmp/sluice-hostile'",
        "SELECT 1 INTO\u{a0}OUTFILE '/tmp/sluice-hostile'",
    ] {
        let r = post(q);
        assert_eq!(r.status, 403, "{q}: {}", &r.body[..r.body.len().min(300)]);
        assert!(r.body.contains("query refused"), "{q}: {}", r.body);
    }
    // Subqueries nested past the limit are refused before they run: a chain of raw selects
    // costs the engine twice as much per level (ten levels used a query's whole timeout).
    let nested = |levels: usize| {
        let mut q = "SELECT v AS x FROM canary".to_string();
        for _ in 0..levels {
            q = format!("SELECT x FROM ({q})");
        }
        s.request(
            "GET",
            &format!("/query?db=canary&q={}", urlencode(&q)),
            &[],
            b"",
        )
    };
    let r = nested(3);
    assert!(
        r.status == 200 && r.body.contains("\"values\""),
        "{}",
        r.body
    );
    let started = Instant::now();
    let r = nested(10);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("subqueries nested more than 3 deep"),
        "{}",
        r.body
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // holt_winters() fits its model in the server: a series spanning more intervals than
    // the model may hold is refused before anything is held, and a fit longer than the
    // query's timeout stops there (its million-interval series would take minutes).
    assert_eq!(
        s.write(
            "db=hw&precision=s",
            "hw v=1 0\nhw v=2 999999\nhw v=3 999998"
        )
        .status,
        204
    );
    s.wait_sql("SELECT count() FROM hw_autogen_hw", "3");
    let influxql =
        |q: &str| s.request("GET", &format!("/query?db=hw&q={}", urlencode(q)), &[], b"");
    let started = Instant::now();
    let r = influxql("SELECT holt_winters(max(v), 5, 0) FROM hw GROUP BY time(1ms)");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("more than 1000000"), "{}", r.body);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let started = Instant::now();
    let r = influxql("SELECT holt_winters(max(v), 5, 0) FROM hw WHERE time >= 0s AND time < 1000000s GROUP BY time(1s)");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("query.timeout (2s)"), "{}", r.body);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );

    let r = post("SELECT 1 FROM");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("Syntax error"), "{}", r.body);
    let r = post("SHOW TABLES");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("X-Sluice-Scope"), Some("local"));
    survived(&s, before, 512 * MIB, "heavy queries");
}

/// A `GROUP BY` past half its memory goes on in files under the data path instead of failing
/// (3 M groups need about 131 MiB in memory), and the spill is bounded too.
#[test]
fn a_group_by_past_half_its_memory_spills_instead_of_failing() {
    let s = server(&[("SLUICE_QUERY_MAX_MEMORY_BYTES", "128MiB")]);
    let before = s.rss();
    let groups = "SELECT count() FROM (SELECT number % 3000000 AS k, avg(number) FROM numbers(20000000) GROUP BY k) FORMAT TSV";
    let r = s.request("POST", "/sql", &[], groups.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.trim(), "3000000");
    survived(&s, before, 512 * MIB, "a spilled GROUP BY");

    // 16 MiB in all: 8 MiB of memory, spilling past 4 MiB, at most 64 MiB on disk.
    let s = server(&[("SLUICE_QUERY_MAX_MEMORY_BYTES", "8MiB")]);
    let r = s.request("POST", "/sql", &[], groups.as_bytes());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains("query.max_memory_bytes")
            || r.body.contains("the disk a query may spill to"),
        "{}",
        r.body
    );
}

#[test]
fn waiting_queries_and_requests_past_the_limits_get_503() {
    let s = server(&[
        ("SLUICE_POOL_CONNECTIONS", "1"),
        ("SLUICE_QUERY_QUEUE_TIMEOUT", "300ms"),
        ("SLUICE_LIMITS_MAX_REQUESTS_IN_FLIGHT", "3"),
        ("SLUICE_LIMITS_BODY_READ_TIMEOUT", "2s"),
    ]);
    let url = s.url.clone();
    let slow = std::thread::spawn(move || {
        ureq::post(&format!("{url}/sql"))
            .send_string("SELECT sleepEachRow(0.5) FROM numbers(6) FORMAT TSV")
            .map(|r| r.status())
            .unwrap_or_else(|e| match e {
                ureq::Error::Status(c, _) => c,
                _ => 0,
            })
    });
    std::thread::sleep(Duration::from_millis(500));
    let r = s.request("POST", "/sql", &[], b"SELECT 1");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert!(r.body.contains("pool.connections"), "{}", r.body);
    assert_eq!(slow.join().expect("slow query"), 200);

    // Stalled bodies: each holds a place; past the limit, 503; each times out with 408.
    let addr = s.url.trim_start_matches("http://").to_string();
    let stall = || {
        let mut c = TcpStream::connect(&addr).expect("connect");
        c.write_all(b"POST /write?db=s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
            .expect("send");
        c
    };
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..3).map(|_| stall()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let r = s.write("db=s", "x v=1 1");
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(
        r.body.contains("limits.max_requests_in_flight"),
        "{}",
        r.body
    );
    let mut answer = String::new();
    stalled[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = stalled[0].read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("limits.body_read_timeout"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    drop(stalled);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.write("db=s", "x v=1 1").status, 204);
}

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

#[test]
fn writes_wait_while_the_disk_is_short() {
    // The WAL's files after start-up (its log, manifest, options) already pass 1 KiB.
    let mut s = Server::start(&[
        ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ("SLUICE_LIMITS_MAX_WAL_DISK_BYTES", "1KiB"),
        ("SLUICE_LIMITS_MIN_FREE_DISK_BYTES", "0"),
    ]);
    s.wait_ready(Duration::from_secs(120));
    let r = s.write("db=d", "x v=1 1");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert!(r.body.contains("limits.max_wal_disk_bytes"), "{}", r.body);
    let metrics = s.request("GET", "/metrics", &[], b"").body;
    assert!(
        metrics.contains("sluice_backpressure_total{reason=\"wal_disk\"} 1"),
        "{metrics}"
    );
    let wal_bytes = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sluice_wal_disk_bytes "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("sluice_wal_disk_bytes");
    assert!(wal_bytes > 1024, "{wal_bytes}");
    drop(s);

    // No volume has a thousand TiB free; the floor is then a tenth of the volume, which this
    // disk may or may not have free: the answer must follow the rule either way.
    let mut s = Server::start(&[
        ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
        ("SLUICE_LIMITS_MIN_FREE_DISK_BYTES", "1000TiB"),
    ]);
    s.wait_ready(Duration::from_secs(120));
    let df = std::process::Command::new("df")
        .args(["-B1", "--output=avail,size"])
        .arg(std::env::temp_dir())
        .output()
        .expect("df");
    let df = String::from_utf8_lossy(&df.stdout).into_owned();
    let nums: Vec<u64> = df
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert_eq!(nums.len(), 2, "df: {df}");
    let (free, size) = (nums[0], nums[1]);
    let r = s.write("db=d", "x v=1 1");
    if free < size / 10 {
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(r.body.contains("limits.min_free_disk_bytes"), "{}", r.body);
        assert!(r.body.contains("bytes free"), "{}", r.body);
    } else if free > size / 10 + (1 << 30) {
        assert_eq!(r.status, 204, "{free} of {size} bytes free: {}", r.body);
    }
    // Reads still work.
    assert_eq!(s.sql("SELECT 1 FORMAT TSV").trim(), "1");
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
