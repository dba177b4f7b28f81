//! Write bodies, names and schemas that a table cannot hold, and a disk running short.

use std::time::Duration;

use crate::common::Server;
use crate::{gzip, metric, server, survived, MIB};

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
    let wal_bytes = metric(&metrics, "sluice_wal_disk_bytes").expect("sluice_wal_disk_bytes");
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
