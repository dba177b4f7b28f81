//! InfluxQL against a real InfluxDB 1.8: the same points written to `influxd` and to sluice,
//! then the same `/query` requests (the shapes Grafana's InfluxDB data source sends: its query
//! builder's defaults and options, its template-variable and health-check queries) sent to
//! both; the JSON answers must be equal (numbers within 1e-9 relative; `holt_winters()` of means
//! within 1e-6, see `fitted_queries`).
//!
//! `QUERIES` lists what is compared; a query whose answer differs fails the test with both
//! answers printed.

mod common;

use common::influxd::Influxd;
use common::influxql::cases::{bound_queries, fitted_queries, queries, regrouped_queries};
use common::influxql::{get, load, regrouped, same_within, settled, FITTED};
use common::Server;
use serde_json::Value;

#[test]
fn influxql_answers_match_influxdb_1_8() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    load(&influxd, &sluice);

    let influx_get = |p: &str| influxd.request("GET", p, &[], b"");
    let sluice_get = |p: &str| sluice.request("GET", p, &[], b"");
    let mut failures = Vec::new();
    let mut same_count = 0;
    let mut compare_within = |q: &str, want: (u16, Value), got: (u16, Value), tolerance: f64| {
        if want.0 == got.0 && same_within(&want.1, &got.1, tolerance) {
            same_count += 1;
            println!("same       {q}");
        } else {
            println!("DIFFERENT  {q}");
            failures.push(format!(
                "{q}\n    influxd: {} {}\n    sluice:  {} {}",
                want.0, want.1, got.0, got.1
            ));
        }
    };
    let ask = |q: &str, tolerance: f64| {
        settled(&|| (get(&influx_get, q), get(&sluice_get, q)), tolerance)
    };
    for q in queries() {
        let (want, got) = ask(&q, 1e-9);
        compare_within(&q, want, got, 1e-9);
    }
    for q in fitted_queries() {
        let (want, got) = ask(&q, FITTED);
        compare_within(&q, want, got, FITTED);
    }
    // Deliberate differences in shape only (see `regrouped_queries`): InfluxDB's answer
    // regrouped, sluice's as it is.
    for q in regrouped_queries() {
        let (status, answer) = get(&influx_get, &q);
        compare_within(&q, (status, regrouped(&answer)), get(&sluice_get, &q), 1e-9);
    }
    // Parameters in a form body, as `curl --data-urlencode` sends them: InfluxDB reads each
    // with `FormValue`, a body's value over the query string's.
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let count = "SELECT count(\"usage\") FROM \"cpu\"";
    let enc = |pairs: &[(&str, &str)]| serde_urlencoded::to_string(pairs).expect("encode");
    let posts = [
        (
            "/query".to_string(),
            enc(&[("db", "g"), ("epoch", "s"), ("q", count)]),
        ),
        (
            "/query?db=g".to_string(),
            enc(&[("q", count), ("epoch", "ms")]),
        ),
        (
            format!("/query?db=nope&{}", enc(&[("q", count)])),
            enc(&[("db", "g")]),
        ),
        (
            format!("/query?{}", enc(&[("q", count)])),
            enc(&[("db", "g"), ("epoch", "ns")]),
        ),
        ("/query".to_string(), enc(&[("q", count)])),
        ("/query?db=g".to_string(), String::new()),
    ];
    for (path, body) in &posts {
        let parse = |r: common::Resp| {
            let v = serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
            (r.status, v)
        };
        let want = parse(influxd.request("POST", path, &form, body.as_bytes()));
        let got = parse(sluice.request("POST", path, &form, body.as_bytes()));
        compare_within(
            &format!("POST {path} with the form {body:?}"),
            want,
            got,
            1e-9,
        );
    }
    // Bound parameters (`params`, as InfluxDB's Go and Python clients send them), in the
    // query string and in a form body; bad values and unreadable JSON included.
    for (q, params) in bound_queries() {
        let path = format!("/query?{}", enc(&[("db", "g"), ("epoch", "ms"), ("q", q)]));
        let body = enc(&[("params", params)]);
        for (method, path, body) in [
            ("GET", format!("{path}&{body}"), ""),
            ("POST", path, body.as_str()),
        ] {
            let parse = |r: common::Resp| {
                let v =
                    serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
                (r.status, v)
            };
            let want = parse(influxd.request(method, &path, &form, body.as_bytes()));
            let got = parse(sluice.request(method, &path, &form, body.as_bytes()));
            // Go's JSON decoder words its errors its own way; the rest must match.
            let json_error = |v: &Value| {
                v["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("error parsing query parameters: "))
            };
            let (want, got) = if json_error(&want.1) && json_error(&got.1) {
                ((want.0, Value::Null), (got.0, Value::Null))
            } else {
                (want, got)
            };
            compare_within(
                &format!("{method} {q} with params {params}"),
                want,
                got,
                1e-9,
            );
        }
    }
    println!(
        "{same_count} of {} queries answered the same",
        same_count + failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} InfluxQL answers differ from InfluxDB 1.8:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Fills of string and boolean calls: a number fills the type's zero value, `fill(linear)`
/// nothing, `fill(previous)` the value before (in the answer's order), as InfluxDB's string
/// and boolean fill iterators do; numeric calls of them are refused, as InfluxDB refuses them.
#[test]
fn string_and_boolean_calls_fill_and_refuse_as_influxdb_does() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let body =
        "sc s=\"a\",b=true 1596240000\nsc s=\"b\",b=false 1596240020\nsc s=\"c\",b=true 1596240050";
    write_both(&influxd, &sluice, "h", "s", body);
    sluice.wait_sql("SELECT count() FROM h_autogen_sc", "3");
    let range = "time >= 1596240000000ms AND time <= 1596240059000ms GROUP BY time(10s)";
    let ask = |r: common::Resp| {
        let v: Value = serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
        (r.status, v)
    };
    // `SELECT <tail>` (with `{range}` the range above) sent to both: their answers.
    let both = |tail: &str| {
        let q = format!("SELECT {}", tail.replace("{range}", range));
        let path = format!(
            "/query?{}",
            serde_urlencoded::to_string([("db", "h"), ("epoch", "s"), ("q", q.as_str())])
                .expect("encode")
        );
        let want = ask(influxd.request("GET", &path, &[], b""));
        let got = ask(sluice.request("GET", &path, &[], b""));
        (q, want, got)
    };
    let mut failures = Vec::new();
    for tail in [
        "first(\"s\") FROM sc WHERE {range} fill(0)",
        "last(\"s\") FROM sc WHERE {range} fill(linear)",
        "last(\"s\"), count(\"b\") FROM sc WHERE {range} fill(-1)",
        "last(\"b\") FROM sc WHERE {range} fill(2.5)",
        "last(\"b\") FROM sc WHERE {range} fill(linear)",
        "last(\"s\") FROM sc WHERE {range} fill(previous) ORDER BY time DESC",
    ] {
        let (q, want, got) = both(tail);
        if want != got {
            failures.push(format!("{q}\n    influxd: {want:?}\n    sluice:  {got:?}"));
        }
    }
    // What InfluxDB computes only with numbers it refuses for strings and booleans (naming
    // its iterator); sluice refuses them too, naming the call and the field.
    for (tail, call, what) in [
        ("mean(\"s\") FROM sc", "mean()", "s is a string field"),
        ("sum(\"b\") FROM sc", "sum()", "b is a boolean field"),
        ("max(\"s\") FROM sc", "max()", "s is a string field"),
        ("stddev(\"b\") FROM sc", "stddev()", "b is a boolean field"),
        (
            "percentile(\"b\", 50) FROM sc",
            "percentile()",
            "b is a boolean field",
        ),
        (
            "integral(\"s\") FROM sc",
            "integral()",
            "s is a string field",
        ),
        (
            "difference(\"b\") FROM sc",
            "difference()",
            "b is a boolean field",
        ),
        (
            "derivative(last(\"s\")) FROM sc WHERE {range}",
            "derivative()",
            "last(s) answers strings",
        ),
        (
            "cumulative_sum(first(\"b\")) FROM sc WHERE {range}",
            "cumulative_sum()",
            "first(b) answers booleans",
        ),
    ] {
        let (q, want, got) = both(tail);
        let error = |a: &(u16, Value)| a.1["results"][0]["error"].as_str().map(str::to_string);
        match (error(&want), error(&got)) {
            (Some(_), Some(e)) if e.contains(call) && e.contains(what) => {}
            _ => failures.push(format!(
                "{q}: both must refuse it, sluice naming {call} and {what:?}\n    influxd: {want:?}\n    sluice:  {got:?}"
            )),
        }
    }
    // `elapsed` takes any type.
    for tail in [
        "elapsed(\"s\", 10s) FROM sc",
        "elapsed(last(\"b\"), 1s) FROM sc WHERE {range}",
    ] {
        let (q, want, got) = both(tail);
        if want != got || want.1["results"][0]["series"].is_null() {
            failures.push(format!("{q}\n    influxd: {want:?}\n    sluice:  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Times before 1970 in every `epoch`: InfluxDB divides with Go's division, which cuts toward
/// zero (a point at -1.5 s is -1 with `epoch=s`), and takes a unit it does not know as
/// nanoseconds.
#[test]
fn epochs_of_times_before_1970_are_influxdbs() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let body = "neg v=1 -1500000000\nneg v=2 -1\nneg v=3 1500000001";
    write_both(&influxd, &sluice, "e", "ns", body);
    sluice.wait_sql("SELECT count() FROM e_autogen_neg", "3");
    let q = "SELECT v FROM neg WHERE time > -10s";
    for epoch in ["", "ns", "u", "ms", "s", "m", "h", "x"] {
        let path = format!(
            "/query?{}",
            serde_urlencoded::to_string([("db", "e"), ("epoch", epoch), ("q", q)]).expect("encode")
        );
        let want = influxd.request("GET", &path, &[], b"").body;
        let got = sluice.request("GET", &path, &[], b"").body;
        let parse = |s: &str| serde_json::from_str::<Value>(s.trim()).expect("JSON");
        assert_eq!(parse(&got), parse(&want), "epoch={epoch}");
    }
}

/// `chunked=true`: the answer as InfluxDB 1.8 cuts it, one JSON object per line: rows of a
/// `SELECT`, `SHOW SERIES`, `SHOW FIELD KEYS` and the cardinalities by `chunk_size` with
/// `partial` flags, the tag listings a series each, the other `SHOW`s whole; errors and empty
/// results one object each; `chunk_size` that is not a positive integer, and `chunked` other
/// than `true`, as InfluxDB takes them.
#[test]
fn chunked_answers_are_cut_as_influxdb_cuts_them() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let mut body = String::new();
    for (i, host) in ["a", "b", "c"].iter().enumerate() {
        let region = if i == 2 { "" } else { ",region=r1" };
        for t in 1..=5 {
            body.push_str(&format!(
                "cpu,host={host}{region} usage={i}.5,n={t}i {}\n",
                60 * t + i
            ));
        }
    }
    body.push_str("mem,host=a free=1 60\nmem,host=q free=2 120\ndisk used=3 60\n");
    write_both(&influxd, &sluice, "ch", "s", &body);
    settled_counts(&sluice, "ch", &[("cpu", 15), ("disk", 1), ("mem", 2)], 6);
    let queries = [
        "SELECT usage FROM cpu",
        "SELECT usage, n FROM cpu GROUP BY *",
        "SELECT * FROM cpu, mem GROUP BY host",
        "SELECT mean(usage) FROM cpu WHERE time >= 0s AND time < 10m GROUP BY time(1m), region fill(0)",
        "SELECT max(usage) FROM cpu WHERE time > now(); SELECT nosuch FROM cpu; SELECT count(n) FROM cpu GROUP BY host",
        // An error last: InfluxDB runs no statement after a failed one (a deliberate difference).
        "SELECT usage FROM nowhere; SHOW MEASUREMENTS; SELECT bad(usage) FROM cpu",
        "SELECT * FROM (SELECT usage FROM cpu) WHERE usage > 0",
        "SHOW SERIES",
        "SHOW SERIES FROM cpu WHERE host != 'b'",
        "SHOW TAG KEYS",
        "SHOW TAG VALUES WITH KEY = host",
        "SHOW FIELD KEYS",
        "SHOW MEASUREMENTS",
        "SHOW RETENTION POLICIES",
        "SHOW TAG KEY CARDINALITY",
        "SHOW FIELD KEY CARDINALITY",
        "SHOW SERIES EXACT CARDINALITY",
        "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host",
        "SHOW MEASUREMENT EXACT CARDINALITY",
    ];
    let lines = |body: &str| -> Vec<Value> {
        body.lines()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_string())))
            .collect()
    };
    let mut failures = Vec::new();
    let mut compared = 0;
    for q in queries {
        for (chunked, size) in [
            ("true", "1"),
            ("true", "2"),
            ("true", "4"),
            ("true", ""),
            ("true", "0"),
            ("true", "x"),
            ("1", "1"),
        ] {
            let pairs = [
                ("db", "ch"),
                ("epoch", "s"),
                ("chunked", chunked),
                ("chunk_size", size),
                ("q", q),
            ];
            let (want, got) = get_both(&influxd, &sluice, &pairs);
            let (want_lines, got_lines) = (lines(&want.body), lines(&got.body));
            compared += 1;
            let same = want.status == got.status
                && same_within(&Value::Array(want_lines), &Value::Array(got_lines), 1e-9);
            if !same {
                failures.push(format!(
                    "chunked={chunked} chunk_size={size:?} {q}\n    influxd: {} {}\n    sluice:  {} {}",
                    want.status, want.body, got.status, got.body
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {compared} chunked answers differ from InfluxDB 1.8:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `pretty=true`: the same text as InfluxDB 1.8's, byte for byte (Go's four-space indentation,
/// its key order), for answers, several statements, empty results, a parse error and chunks.
#[test]
fn pretty_answers_are_influxdbs_byte_for_byte() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let body = "cpu,host=a,region=r1 usage=0.5,n=1i 60\ncpu,host=b usage=2,n=2i 120\n\
                cpu,host=a,region=r1 usage=1.25,n=3i 180\nmem,host=a free=7 60\n";
    write_both(&influxd, &sluice, "pr", "s", body);
    settled_counts(&sluice, "pr", &[("cpu", 3), ("mem", 1)], 3);
    let asks: &[(&str, Extra)] = &[
        ("SELECT * FROM cpu GROUP BY host", &[]),
        ("SELECT usage FROM cpu", &[("epoch", "s")]),
        ("SELECT mean(usage) FROM cpu WHERE time >= 0s AND time < 4m GROUP BY time(1m) fill(none)", &[("epoch", "s")]),
        ("SHOW MEASUREMENTS; SHOW TAG KEYS; SHOW FIELD KEYS", &[]),
        ("SHOW TAG VALUES WITH KEY = host; SHOW SERIES", &[]),
        ("SHOW RETENTION POLICIES; SELECT usage FROM nowhere", &[]),
        ("SELECT bad syntax(", &[]),
        ("SELECT usage FROM cpu; SHOW TAG KEYS", &[("chunked", "true"), ("chunk_size", "2")]),
        ("SHOW FIELD KEYS", &[("chunked", "true")]),
    ];
    let failures = texts_differing(&influxd, &sluice, &[("db", "pr"), ("pretty", "true")], asks);
    assert!(
        failures.is_empty(),
        "{} pretty answers differ from InfluxDB 1.8's text:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Strings in JSON answers are escaped as Go escapes them (`<`, `>`, `&`, U+2028 and U+2029
/// as `\u....`): tag values, measurement names, string fields, the `SHOW` answers written from
/// the engine's rows and parse errors read as InfluxDB's byte for byte, compact, pretty and
/// chunked.
#[test]
fn json_strings_are_escaped_as_influxdb_escapes_them() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let body = "a&b,t=x<y>z,u=p/q v=1,s=\"<b>&amp;</b> a/b \\\\ \u{2028}\u{2029}\" 60\n\
                a&b,t=plain v=2,s=\"x\" 120\n";
    write_both(&influxd, &sluice, "es", "s", body);
    settled_counts(&sluice, "es", &[("a&b", 2)], 2);
    let asks: &[(&str, Extra)] = &[
        ("SELECT * FROM \"a&b\" GROUP BY *", &[]),
        ("SELECT * FROM \"a&b\"", &[("pretty", "true")]),
        (
            "SELECT * FROM \"a&b\" GROUP BY *",
            &[("chunked", "true"), ("chunk_size", "1")],
        ),
        (
            "SHOW MEASUREMENTS; SHOW SERIES; SHOW TAG VALUES WITH KEY IN (t, u)",
            &[],
        ),
        ("SHOW TAG VALUES WITH KEY = t", &[("chunked", "true")]),
        ("SELECT & FROM \"a&b\"", &[]),
        ("SELECT & FROM \"a&b\"", &[("pretty", "true")]),
    ];
    let failures = texts_differing(&influxd, &sluice, &[("db", "es")], asks);
    assert!(
        failures.is_empty(),
        "{} answers differ from InfluxDB 1.8's text:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `Accept: application/csv` or `text/csv`: InfluxDB 1.8's CSV byte for byte (headers again
/// when the columns change, blank lines between statements, series keys escaped, quoting,
/// numbers in full, times as integers, statement errors left out, a parse error as `error`),
/// chunked or not, and the content type `Accept` negotiates (as InfluxDB does: case,
/// parameters, wildcards, `q`; JSON where it falls to JSON); and groups whose tag values go on
/// past another's with a space in InfluxDB's order, which the CSV shows line by line.
#[test]
fn csv_answers_are_influxdbs_byte_for_byte() {
    let influxd = Influxd::start();
    let sluice = Server::start(&[]);
    let body = "cpu,host=a,region=r1 usage=0.5,n=1i 60\ncpu,host=b usage=2,n=2i 120\n\
                cpu,host=a,region=r1 usage=1.25,n=3i 180\nmem,host=a free=7 60\n\
                esc,t=a\\ b,u=x\\,y v=1.5,s=\"q\\\"uote, comma\" 2\n\
                esc,t=lead v=1e21,s=\" lead\" 3\nesc v=0.0000001,ok=true 4\n\
                reg,region=us\\ east v=1 1\nreg,region=us\\ east\\ 2,dc=a v=2 2\nreg,region=us v=3 3\n\
                reg,region=us!,dc=a\\ b v=4 4\n\
                ord,region=q\"a v=1 1\nord,region=q# v=2 2\nord,region=p/x v=3 3\nord,region=p0 v=4 4\n";
    write_both(&influxd, &sluice, "csv", "s", body);
    settled_counts(
        &sluice,
        "csv",
        &[("cpu", 3), ("mem", 1), ("esc", 3), ("reg", 4), ("ord", 4)],
        14,
    );
    let asks: &[(&str, &str, Extra)] = &[
        ("application/csv", "SELECT * FROM cpu", &[]),
        ("application/csv", "SELECT usage FROM cpu GROUP BY host, region", &[]),
        ("text/csv", "SELECT * FROM esc GROUP BY *", &[]),
        ("text/csv", "SELECT * FROM cpu, mem", &[("epoch", "s")]),
        ("application/csv", "SELECT mean(usage) FROM cpu WHERE time >= 0s AND time < 4m GROUP BY time(1m)", &[]),
        // An error last: InfluxDB runs no statement after a failed one (a deliberate difference).
        ("application/csv", "SELECT usage FROM cpu WHERE time > now(); SHOW MEASUREMENTS; SHOW TAG KEYS; SELECT bad(x) FROM cpu", &[]),
        ("application/csv", "SHOW TAG VALUES WITH KEY = host; SHOW SERIES; SHOW FIELD KEYS", &[]),
        ("application/csv", "SELECT * FROM esc GROUP BY *; SHOW MEASUREMENTS", &[("chunked", "true"), ("chunk_size", "1")]),
        ("application/csv", "SELECT bad syntax(", &[]),
        // Groups in InfluxDB's order where a value goes on past another's end with a space.
        ("application/csv", "SELECT v FROM reg GROUP BY region", &[]),
        ("application/csv", "SELECT v FROM reg GROUP BY region ORDER BY time DESC", &[]),
        ("application/csv", "SELECT sum(v) FROM reg GROUP BY *", &[]),
        ("application/csv", "SELECT v FROM reg, esc GROUP BY * ORDER BY time DESC", &[]),
        // ... and where JSON escapes a character of a value (`"`), or the engine might (`/`).
        ("application/csv", "SELECT v FROM ord GROUP BY region", &[]),
        ("application/csv", "SELECT v FROM ord GROUP BY region ORDER BY time DESC", &[]),
        ("application/csv", "SELECT count(v) FROM ord GROUP BY *", &[]),
        ("application/csv", "SHOW SERIES FROM ord; SHOW TAG VALUES FROM ord WITH KEY = region", &[]),
        // `Accept` negotiated as InfluxDB negotiates it: case, parameters, wildcards, `q`.
        ("Application/CSV; charset=utf-8", "SELECT * FROM cpu", &[]),
        ("text/*", "SELECT * FROM cpu", &[]),
        ("application/json;q=0.5, text/csv", "SELECT * FROM cpu", &[]),
        ("text/csv;q=x, application/json;q=0.1", "SELECT * FROM cpu", &[]),
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "SELECT * FROM cpu", &[]),
        ("nonsense, */csv", "SHOW MEASUREMENTS", &[]),
        ("application/json", "SELECT bad syntax(", &[]),
    ];
    let mut failures = Vec::new();
    for (accept, q, extra) in asks {
        let mut pairs = vec![("db", "csv"), ("q", *q)];
        pairs.extend_from_slice(extra);
        let path = format!(
            "/query?{}",
            serde_urlencoded::to_string(&pairs).expect("encode")
        );
        let headers = [("Accept", *accept)];
        let want = influxd.request("GET", &path, &headers, b"");
        let got = sluice.request("GET", &path, &headers, b"");
        let kind = |r: &common::Resp| r.header("content-type").unwrap_or_default().to_string();
        if (want.status, &want.body, kind(&want)) != (got.status, &got.body, kind(&got)) {
            failures.push(format!(
                "{accept} {q} {extra:?}\n--- influxd {} {}\n{}--- sluice {} {}\n{}",
                want.status,
                kind(&want),
                want.body,
                got.status,
                kind(&got),
                got.body
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} CSV answers differ from InfluxDB 1.8's text:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Waits until sluice holds `tables`' rows (measurement, count) of `db` and `series` series
/// rows (they flush apart from the points, and listings must see every series).
fn settled_counts(sluice: &Server, db: &str, tables: &[(&str, usize)], series: usize) {
    for (m, n) in tables {
        sluice.wait_sql(
            &format!("SELECT count() FROM `{db}_autogen_{m}`"),
            &n.to_string(),
        );
    }
    sluice.wait_sql(
        &format!("SELECT count() FROM sluice_series FINAL WHERE db = '{db}'"),
        &series.to_string(),
    );
}

/// Parameters a request adds to `db` and `q`.
type Extra<'a> = &'a [(&'a str, &'a str)];

/// The requests of `asks` (a query and its parameters beside `common`) whose status or text
/// differs between InfluxDB and sluice, each with both answers.
fn texts_differing(
    influxd: &Influxd,
    sluice: &Server,
    common: &[(&str, &str)],
    asks: &[(&str, Extra)],
) -> Vec<String> {
    let mut failures = Vec::new();
    for (q, extra) in asks {
        let mut pairs = common.to_vec();
        pairs.push(("q", q));
        pairs.extend_from_slice(extra);
        let (want, got) = get_both(influxd, sluice, &pairs);
        if (want.status, &want.body) != (got.status, &got.body) {
            failures.push(format!(
                "{q} {extra:?}\n--- influxd {}\n{}--- sluice {}\n{}",
                want.status, want.body, got.status, got.body
            ));
        }
    }
    failures
}

/// `GET /query` with `pairs` from InfluxDB and from sluice.
fn get_both(
    influxd: &Influxd,
    sluice: &Server,
    pairs: &[(&str, &str)],
) -> (common::Resp, common::Resp) {
    let path = format!(
        "/query?{}",
        serde_urlencoded::to_string(pairs).expect("encode")
    );
    (
        influxd.request("GET", &path, &[], b""),
        sluice.request("GET", &path, &[], b""),
    )
}

/// Creates database `db` on both and writes `body` (line protocol in `precision`) to both.
fn write_both(influxd: &Influxd, sluice: &Server, db: &str, precision: &str, body: &str) {
    let create = format!("/query?q=CREATE%20DATABASE%20{db}");
    assert_eq!(influxd.request("POST", &create, &[], b"").status, 200);
    assert_eq!(sluice.request("POST", &create, &[], b"").status, 200);
    let params = format!("db={db}&precision={precision}");
    let w = influxd.request("POST", &format!("/write?{params}"), &[], body.as_bytes());
    assert_eq!(w.status, 204, "influxd write: {}", w.body);
    let w = sluice.write(&params, body);
    assert_eq!(w.status, 204, "sluice write: {}", w.body);
}
