//! Queries that reach outside, run long, take too much memory, or wait for a place.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Resp, Server};
use crate::{metric, server, survived, urlencode, MIB};

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
    // The engine's words follow the limit, without its exception codes.
    assert!(r.body.contains("memory limit exceeded"), "{}", r.body);
    assert!(!r.body.contains("DB::Exception"), "{}", r.body);

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

/// `query.timeout` bounds an InfluxQL request as a whole, not each engine query of it: a
/// statement over thousands of measurements (a few milliseconds each) ran on for minutes
/// after its client had gone. And what a statement gets wrong that only the engine sees is
/// named in words, not as the engine's exception.
#[test]
fn an_influxql_request_is_bounded_as_a_whole_and_its_errors_name_the_problem() {
    let s = server(&[("SLUICE_QUERY_TIMEOUT", "1s")]);
    let before = s.rss();
    let influxql = |q: &str| {
        let body = format!("db=canary&q={}", urlencode(q));
        let ct = [("Content-Type", "application/x-www-form-urlencoded")];
        let r = s.request("POST", "/query", &ct, body.as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    };

    let started = Instant::now();
    let body = influxql(&format!("SELECT v FROM {}", vec!["canary"; 5000].join(",")));
    assert!(
        body.contains("query.timeout (1s), which bounds all the reads of a request together"),
        "{}",
        &body[..body.len().min(400)]
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    for (q, error) in [
        (
            "SELECT v FROM canary WHERE host =~ /a(/",
            "invalid regular expression /a(/: missing ): a(",
        ),
        (
            "SELECT moving_average(v, 999999999999) FROM canary",
            "moving_average window must be at most 1073741824, got 999999999999",
        ),
        (
            "SELECT top(v, 99999999999) FROM canary",
            "limit (99999999999) in top function must be at most 16777215",
        ),
        (
            &format!(
                "SELECT {} FROM canary",
                vec!["percentile(v, 50)"; 3000].join(",")
            ),
            "the statement's plan is larger than the engine reads",
        ),
    ] {
        let body = influxql(q);
        assert!(body.contains(error), "{}: {body}", &q[..q.len().min(60)]);
        assert!(!body.contains("DB::Exception"), "{body}");
    }
    // Math, divisions and regex matches nested many times: the plan's SQL grows with the
    // nesting, not exponentially (24 nested `sqrt()` calls, 200 bytes, once took 5 GB of
    // memory and 5 s to plan; 30 would have taken the server down).
    let started = Instant::now();
    for q in [
        // Deep enough that doubling SQL passes the engine's 256 KiB (and fails here), shallow
        // enough that it does not exhaust the machine's memory on the way.
        format!(
            "SELECT {}v{} FROM canary",
            "sqrt(".repeat(20),
            ")".repeat(20)
        ),
        format!(
            "SELECT {}v{} FROM canary",
            "round(abs(".repeat(6),
            "))".repeat(6)
        ),
        format!(
            "SELECT {}v{} FROM canary",
            "1 / (".repeat(40),
            ")".repeat(40)
        ),
        format!(
            "SELECT v FROM canary WHERE {}host{}",
            "(".repeat(18),
            " =~ /a/)".repeat(18)
        ),
    ] {
        let body = influxql(&q);
        // Answered: points or an empty result, not an error (the engine once refused these
        // as a query tree too big, its aliases expanded at each use).
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let result = &answer["results"][0];
        assert!(
            result["statement_id"] == 0 && result.get("error").is_none(),
            "{}: {body}",
            &q[..60]
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A range that ends before it starts matches nothing: no series, as InfluxDB answers.
    let body = influxql(
        "SELECT mean(v) FROM canary WHERE time > 9223372036854775807 GROUP BY time(1h) fill(0)",
    );
    assert_eq!(body.trim(), r#"{"results":[{"statement_id":0}]}"#);
    survived(&s, before, 256 * MIB, "requests of many reads");
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

/// Whether `sluice_requests_in_flight` reads `n` within 2 s.
fn in_flight_becomes(s: &Server, n: u64) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        let metrics = s.request("GET", "/metrics", &[], b"").body;
        if metric(&metrics, "sluice_requests_in_flight") == Some(n) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Repeats `ask` every 50 ms until it is answered 503 or `within` has passed; the last answer.
fn until_refused(within: Duration, ask: impl Fn() -> Resp) -> Resp {
    let started = Instant::now();
    loop {
        let r = ask();
        if r.status == 503 || started.elapsed() >= within {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
    // Read to its end: the answer streams, and the query holds its place (and the
    // connection) until its last row, not until its headers.
    let slow = std::thread::spawn(move || {
        ureq::post(&format!("{url}/sql"))
            .send_string("SELECT sleepEachRow(0.5) FROM numbers(6) FORMAT TSV")
            .map(|r| (r.status(), r.into_string().unwrap_or_default()))
            .unwrap_or_else(|e| match e {
                ureq::Error::Status(c, _) => (c, String::new()),
                _ => (0, String::new()),
            })
    });
    // The slow query holds the only connection for 3 s once it starts; on a loaded machine
    // it may start late, so ask until the pool is taken rather than after a fixed sleep.
    let r = until_refused(Duration::from_millis(2500), || {
        s.request("POST", "/sql", &[], b"SELECT 1")
    });
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert!(r.body.contains("pool.connections"), "{}", r.body);
    let (status, rows) = slow.join().expect("slow query");
    assert_eq!((status, rows.lines().count()), (200, 6), "{rows}");

    // Stalled bodies: each holds a place; past the limit, 503; each times out with 408.
    let addr = s.url.trim_start_matches("http://").to_string();
    let stall = || {
        let mut c = TcpStream::connect(&addr).expect("connect");
        c.write_all(b"POST /write?db=s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
            .expect("send");
        c
    };
    // The slow query's place is given back just after its last chunk reaches the client.
    assert!(
        in_flight_becomes(&s, 0),
        "the slow query's place was not given back"
    );
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..3).map(|_| stall()).collect();
    assert!(in_flight_becomes(&s, 3), "stalled bodies hold a place each");
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
    assert!(
        in_flight_becomes(&s, 0),
        "timed-out bodies give their places back"
    );
    assert_eq!(s.write("db=s", "x v=1 1").status, 204);
}
