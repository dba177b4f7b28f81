//! A series recorded twice in a pod's series table, as a hand-off leaves it on the receiving
//! pod until the engine merges the two rows, counts once in every InfluxQL answer: the reads
//! that take the table as it is (a tag condition's set of ids, the distinct names of `SHOW`
//! statements) and those that need one row per series (tags joined to points, `SHOW SERIES`,
//! cardinalities) alike. A series first written after a tag condition's set of ids was read
//! and remembered is in the reads that follow, and in the `SHOW` answers kept before it. And a
//! new series' row is in before its points.
//!
//! The second rows are written into the stopped server's engine by this test binary run again
//! as a helper (one engine path per process), with the series table's merges held off, so
//! that the rows stay doubled for as long as the test reads.

mod common;

use std::process::Command;

use common::influxql::get;
use common::Server;
use serde_json::Value;

/// Set for the helper run: the engine path, then one statement per line.
const HELPER: &str = "SLUICE_TEST_SERIES_ROWS_SQL";

/// Runs the statements of [`HELPER`] in the engine at its path: not a test of its own, but
/// the helper process [`in_engine`] starts (as an ignored test, so that a normal run does not
/// count it as passing).
#[test]
#[ignore = "a helper process of a_series_recorded_twice_counts_once"]
fn engine_helper() {
    let Ok(spec) = std::env::var(HELPER) else {
        return;
    };
    let mut lines = spec.lines();
    let path = lines.next().expect("the engine path");
    let conn = chdb_rust::connection::Connection::open(&[&format!("--path={path}")])
        .expect("open the engine");
    for sql in lines {
        if let Err(e) = conn.query(sql, chdb_rust::format::OutputFormat::TabSeparated) {
            panic!("{sql}: {e}");
        }
    }
}

fn in_engine(path: &std::path::Path, statements: &[&str]) {
    let spec = format!("{}\n{}", path.display(), statements.join("\n"));
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--ignored",
            "--exact",
            "engine_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER, spec)
        .output()
        .expect("run the helper");
    assert!(
        out.status.success(),
        "the helper failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `q`'s answer in database `g`, which must be a success.
fn answer(s: &Server, q: &str) -> Value {
    let (status, v) = get(&|p| s.request("GET", p, &[], b""), q);
    assert_eq!(status, 200, "{q}: {v}");
    assert!(v["results"][0]["error"].is_null(), "{q}: {v}");
    v
}

/// Rows of the series table, as stored and merged.
fn series_rows(s: &Server) -> (u64, u64) {
    let count = |from: &str| -> u64 {
        s.sql(&format!("SELECT count() FROM {from} FORMAT TSV"))
            .trim()
            .parse()
            .unwrap()
    };
    (count("sluice_series"), count("sluice_series FINAL"))
}

#[test]
fn a_series_recorded_twice_counts_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = Server::start_in(tmp.path(), &[]);
    s.request("POST", "/query?q=CREATE%20DATABASE%20g", &[], b"");
    let mut body = String::new();
    for (i, host) in ["a", "b", "c", "d"].iter().enumerate() {
        let region = if i % 2 == 0 { "r1" } else { "r2" };
        for t in 0..5u64 {
            body.push_str(&format!(
                "cpu,host={host},region={region} v={} {}\n",
                i as u64 * 10 + t,
                1_600_000_000 + t * 30
            ));
        }
        body.push_str(&format!("mem,host={host} used={i} 1600000000\n"));
    }
    assert_eq!(s.write("db=g&precision=s", &body).status, 204);
    s.wait_sql("SELECT count() FROM g_autogen_cpu", "20");
    s.wait_sql("SELECT count() FROM g_autogen_mem", "4");
    // The series rows flush apart from the points: the answers taken as the reference must
    // see every series.
    s.wait_sql("SELECT count() FROM sluice_series", "8");
    let queries = [
        "SHOW SERIES",
        "SHOW SERIES WHERE \"region\" = 'r1'",
        "SHOW SERIES CARDINALITY",
        "SHOW MEASUREMENTS",
        "SHOW MEASUREMENT CARDINALITY",
        "SHOW TAG KEYS",
        "SHOW TAG VALUES WITH KEY = \"host\"",
        "SHOW TAG VALUES WITH KEY = \"host\" WHERE \"region\" = 'r1'",
        "SHOW TAG VALUES WITH KEY =~ /.*/",
        "SELECT count(\"v\") FROM \"cpu\" WHERE \"host\" = 'a'",
        "SELECT sum(\"v\") FROM \"cpu\" WHERE \"region\" = 'r1' GROUP BY \"host\"",
        "SELECT count(\"v\") FROM \"cpu\" GROUP BY \"host\"",
        "SELECT mean(\"v\") FROM \"cpu\" WHERE \"region\" = 'r2' AND time >= 1600000000s AND time < 1600000150s GROUP BY time(1m), \"region\"",
        "SELECT \"v\" FROM \"cpu\" WHERE \"host\" = 'b'",
        "SELECT * FROM \"cpu\" WHERE \"host\" = 'c' OR \"host\" = 'd'",
        "SELECT last(\"v\") FROM \"cpu\" GROUP BY \"host\"",
        "SELECT last(\"v\") FROM \"cpu\" WHERE \"region\" = 'r1'",
        "SELECT top(\"v\", \"host\", 2) FROM \"cpu\" WHERE \"region\" = 'r2'",
        "SELECT max(\"v\"), \"host\" FROM \"cpu\" WHERE \"host\" = 'a' OR \"host\" = 'b'",
        "SELECT derivative(\"v\", 30s) FROM \"cpu\" WHERE \"host\" = 'a'",
        "SELECT \"used\" FROM \"mem\" WHERE \"host\" = 'a' GROUP BY *",
    ];
    let before: Vec<Value> = queries.iter().map(|q| answer(&s, q)).collect();
    assert_eq!(series_rows(&s), (8, 8), "one row per series to begin with");

    s.terminate();
    in_engine(
        &tmp.path().join("chdb"),
        &[
            // No merge can take two parts together, so the second rows stay.
            "ALTER TABLE sluice_series MODIFY SETTING max_bytes_to_merge_at_max_space_in_pool = 1, max_bytes_to_merge_at_min_space_in_pool = 1",
            "INSERT INTO sluice_series (db, measurement, series_id, tags, first_seen) SELECT db, measurement, series_id, tags, first_seen + toIntervalSecond(1) FROM sluice_series",
        ],
    );
    s.restart();
    assert_eq!(series_rows(&s), (16, 8), "every series recorded twice");
    for (q, want) in queries.iter().zip(&before) {
        assert_eq!(&answer(&s, q), want, "{q}");
    }
    assert_eq!(
        series_rows(&s),
        (16, 8),
        "the rows stayed doubled while the queries ran"
    );
}

/// The hosts of `q`'s answer, grouped by host, with their values.
fn by_host(s: &Server, q: &str) -> Vec<(String, Value)> {
    let v = answer(s, q);
    v["results"][0]["series"]
        .as_array()
        .map(|series| {
            series
                .iter()
                .map(|x| {
                    (
                        x["tags"]["host"].as_str().unwrap().to_string(),
                        x["values"][0][1].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `sluice_<name>{how="<how>"}` on `s`.
fn counted(s: &Server, name: &str, how: &str) -> u64 {
    let metrics = s.request("GET", "/metrics", &[], b"").body;
    let name = format!("sluice_{name}{{how=\"{how}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&name)?.trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// A server with database `g` holding `body`: two points of two series of `cpu` (line
/// protocol, seconds), flushed with their series rows.
fn two_series(body: &str) -> Server {
    let s = Server::start(&[]);
    s.request("POST", "/query?q=CREATE%20DATABASE%20g", &[], b"");
    assert_eq!(s.write("db=g&precision=s", body).status, 204);
    s.wait_sql("SELECT count() FROM g_autogen_cpu", "2");
    s.wait_sql("SELECT count() FROM sluice_series", "2");
    s
}

/// `SHOW` answers are kept while the series table is unchanged, and a series first written
/// after one was kept is in the next answers.
#[test]
fn a_kept_show_answer_gives_way_to_a_new_series() {
    let s = two_series("cpu,host=a v=1 1600000000\ncpu,host=b v=2 1600000000\n");
    let values = |s: &Server| {
        let v = answer(s, "SHOW TAG VALUES FROM cpu WITH KEY = host");
        v["results"][0]["series"][0]["values"].to_string()
    };
    let keys = |s: &Server| {
        let v = answer(s, "SHOW TAG KEYS; SHOW SERIES");
        v["results"].to_string()
    };
    let (first_values, first_keys) = (values(&s), keys(&s));
    assert_eq!(first_values, r#"[["host","a"],["host","b"]]"#);
    let read = counted(&s, "series_answers_total", "read");
    for _ in 0..3 {
        assert_eq!(values(&s), first_values);
        assert_eq!(keys(&s), first_keys);
    }
    assert_eq!(
        counted(&s, "series_answers_total", "read"),
        read,
        "the series table did not change: every answer was kept"
    );
    assert!(counted(&s, "series_answers_total", "kept") >= 9);
    let body = "cpu,host=c,dc=x v=3 1600000000\n";
    assert_eq!(s.write("db=g&precision=s", body).status, 204);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (v, k) = (values(&s), keys(&s));
        if v == r#"[["host","a"],["host","b"],["host","c"]]"#
            && k.contains(r#"["dc"]"#)
            && k.contains("cpu,dc=x,host=c")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new series is missing from the answers: {v} {k}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_series_written_after_its_condition_was_read_is_in_the_next_reads() {
    let s =
        two_series("cpu,host=a,region=r1 v=1 1600000000\ncpu,host=b,region=r2 v=2 1600000000\n");
    let region = "SELECT count(\"v\") FROM \"cpu\" WHERE \"region\" = 'r1' GROUP BY \"host\"";
    let host = "SELECT sum(\"v\") FROM \"cpu\" WHERE \"host\" = 'c' GROUP BY \"host\"";
    let none = "SELECT sum(\"v\") FROM \"cpu\" WHERE \"host\" = 'zz' GROUP BY \"host\"";
    // Read twice, so that the second read is answered with the ids remembered by the first.
    for _ in 0..2 {
        assert_eq!(by_host(&s, region), vec![("a".into(), 1.into())]);
        assert_eq!(by_host(&s, host), vec![]);
        assert_eq!(by_host(&s, none), vec![]);
    }
    assert!(counted(&s, "series_lookups_total", "remembered") >= 3);
    assert!(counted(&s, "series_lookups_total", "looked_up") >= 3);
    let body = "cpu,host=c,region=r1 v=3 1600000000\ncpu,host=c,region=r1 v=4 1600000010\n";
    assert_eq!(s.write("db=g&precision=s", body).status, 204);
    // Points and series rows reach the engine in separate flushes, and a read may come just
    // between the series row and the count of series table writes: within seconds, never.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = by_host(&s, region);
        let h = by_host(&s, host);
        if r == vec![("a".into(), 1.into()), ("c".into(), 2.into())]
            && h == vec![("c".into(), 7.into())]
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new series is missing from the reads: {r:?} {h:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(by_host(&s, none), vec![]);
}

/// A write's new series rows reach the engine before its points (with one flush worker, the
/// default): once a new series' points can be counted, reads by tag find the series.
#[test]
fn a_new_series_row_is_in_before_its_points() {
    let s = Server::start(&[]);
    s.request("POST", "/query?q=CREATE%20DATABASE%20g", &[], b"");
    for i in 0..10u64 {
        let body = format!("cpu,host=h{i} v={i} 1600000000\n");
        assert_eq!(s.write("db=g&precision=s", &body).status, 204);
        s.wait_sql("SELECT count() FROM g_autogen_cpu", &(i + 1).to_string());
        let rows = s.sql(&format!(
            "SELECT count() FROM sluice_series WHERE tags['host'] = 'h{i}' FORMAT TSV"
        ));
        assert_eq!(
            rows.trim(),
            "1",
            "h{i}'s points are in, its series row is not"
        );
    }
}

/// Tag values of tens of kilobytes, grouped by over the few series a condition selects: the
/// answer is every series, as for short values. A plan names a small set's tags only within a
/// bound on their bytes, since the engine refuses a query's text past 256 KiB
/// (`max_query_size`), and five such values already pass it.
#[test]
fn a_read_grouped_by_long_tag_values_answers_every_series() {
    let s = Server::start(&[]);
    s.request("POST", "/query?q=CREATE%20DATABASE%20g", &[], b"");
    let long = "x".repeat(60_000);
    let body: String = (0..5)
        .map(|i| format!("cpu,big={long}{i} v={i} 1600000000\n"))
        .collect();
    assert_eq!(s.write("db=g&precision=s", &body).status, 204);
    s.wait_sql("SELECT count() FROM g_autogen_cpu", "5");
    s.wait_sql("SELECT count() FROM sluice_series", "5");
    let q = "SELECT sum(\"v\") FROM \"cpu\" WHERE \"big\" =~ /^x/ GROUP BY \"big\"";
    // Twice: looked up, then remembered.
    for _ in 0..2 {
        let v = answer(&s, q);
        let series = v["results"][0]["series"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let got: Vec<(String, Value)> = series
            .iter()
            .map(|x| {
                let tag = x["tags"]["big"].as_str().unwrap_or_default();
                assert!(tag.starts_with(&long), "{}", &tag[..tag.len().min(80)]);
                (tag[long.len()..].to_string(), x["values"][0][1].clone())
            })
            .collect();
        let want: Vec<(String, Value)> = (0..5).map(|i| (i.to_string(), i.into())).collect();
        assert_eq!(got, want);
    }
}
