//! Differential test against a real InfluxDB 1.8: the same requests go to `influxd` (built by
//! `scripts/install-go-tools`; `$SLUICE_INFLUXD` overrides the path) and to sluice, in the same
//! order, and the answers (status and error message, or the `/query` JSON) must be equal.
//!
//! The only exceptions are the deliberate differences the README documents. Each [`Allow`]
//! quotes the README (the test checks the quote is still there) and rewrites sluice's answer
//! into InfluxDB's form only when it differs in exactly the documented way, so an allowance
//! cannot hide any other difference.

mod common;

use common::influxd::{Influxd, MAX_BODY};
use common::{Resp, Server};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// An answer reduced to what is compared: the status, the body as JSON (`null` when empty, a
/// string when it is not JSON) and, for `/ping`, the `X-Influxdb-Version` header.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    status: u16,
    body: Value,
    version: Option<String>,
}

impl Answer {
    fn from(resp: &Resp, with_version: bool) -> Answer {
        let text = resp.body.trim();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
        };
        Answer {
            status: resp.status,
            body,
            version: with_version.then(|| {
                resp.header("X-Influxdb-Version")
                    .unwrap_or("(none)")
                    .to_string()
            }),
        }
    }

    fn error(&self) -> Option<&str> {
        self.body.get("error").and_then(Value::as_str)
    }

    fn set_error(&mut self, message: String) {
        self.body = json!({ "error": message });
    }

    fn show(&self) -> String {
        let body = match &self.body {
            Value::Null => String::new(),
            Value::Object(o) if o.len() == 1 && o.contains_key("error") => {
                format!("error: {:?}", self.error().unwrap_or_default())
            }
            other => other.to_string(),
        };
        match &self.version {
            Some(v) => format!("{} X-Influxdb-Version: {v} {body}", self.status),
            None => format!("{} {body}", self.status),
        }
    }
}

/// A documented, deliberate difference of sluice's answer from InfluxDB 1.8's.
#[derive(Clone, Copy, Debug)]
enum Allow {
    /// Sluice appends ` (line N)` to each parse or conflict message.
    LineNumbers,
    /// Sluice's `dropped=` is the number of lines dropped (this many); InfluxDB says `dropped=0`
    /// for parse errors.
    TrueDroppedCount(usize),
    /// An unknown retention policy is 404 `retention policy not found: "rp" (database "db")`;
    /// InfluxDB answers 500 `retention policy not found: rp`.
    UnknownRetentionPolicy404 { db: &'static str, rp: &'static str },
    /// A body over the limit is 413 with a message that names the limit; InfluxDB's says only
    /// `Request Entity Too Large`.
    TooLargeNamesLimit,
    /// Malformed gzip is 400 `invalid gzip body: ...`; InfluxDB's message is `gzip: ...`.
    GzipWording,
}

impl Allow {
    /// What the README says about this difference, verbatim (whitespace collapsed).
    fn readme(self) -> &'static [&'static str] {
        match self {
            Allow::LineNumbers => &["Error messages name the line number: `(line N)`."],
            Allow::TrueDroppedCount(_) => &[
                "`dropped=N` always counts the lines dropped; InfluxDB reports `dropped=0` for parse errors.",
            ],
            Allow::UnknownRetentionPolicy404 { .. } => &[
                "An unknown retention policy is 404 (not found), where InfluxDB answers 500",
                "| unknown retention policy | 404 | `retention policy not found: \"x\" (database \"d\")` |",
            ],
            Allow::TooLargeNamesLimit => &["| 413 | names the limit |"],
            Allow::GzipWording => &["| malformed gzip | 400 | `invalid gzip body: ...` |"],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Allow::LineNumbers => "(line N)",
            Allow::TrueDroppedCount(_) => "true dropped=",
            Allow::UnknownRetentionPolicy404 { .. } => "unknown rp 404",
            Allow::TooLargeNamesLimit => "413 names limit",
            Allow::GzipWording => "gzip wording",
        }
    }

    /// Rewrites sluice's answer into InfluxDB's form when, and only when, it differs in exactly
    /// the documented way. Returns whether it did.
    fn apply(self, influx: &Answer, sluice: &mut Answer) -> bool {
        let (Some(want), Some(got)) = (influx.error(), sluice.error()) else {
            return false;
        };
        let rewritten = match self {
            Allow::LineNumbers => {
                let stripped = strip_line_numbers(got);
                (stripped != got).then_some(stripped)
            }
            Allow::TrueDroppedCount(n) => {
                let suffix = format!(" dropped={n}");
                (want.ends_with(" dropped=0") && got.ends_with(&suffix))
                    .then(|| format!("{} dropped=0", &got[..got.len() - suffix.len()]))
            }
            Allow::UnknownRetentionPolicy404 { db, rp } => (influx.status == 500
                && want == format!("retention policy not found: {rp}")
                && sluice.status == 404
                && got == format!("retention policy not found: \"{rp}\" (database \"{db}\")"))
            .then(|| {
                sluice.status = 500;
                want.to_string()
            }),
            Allow::TooLargeNamesLimit => (influx.status == 413
                && sluice.status == 413
                && got.len() > want.len()
                && got.starts_with(want)
                && (got.contains("64KiB") || got.contains(&MAX_BODY.to_string())))
            .then(|| want.to_string()),
            Allow::GzipWording => (influx.status == 400
                && sluice.status == 400
                && want.starts_with("gzip: ")
                && got.starts_with("invalid gzip body: "))
            .then(|| want.to_string()),
        };
        match rewritten {
            Some(message) => {
                sluice.set_error(message);
                true
            }
            None => false,
        }
    }
}

/// Removes every ` (line N)` from `s`.
fn strip_line_numbers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(" (line ") {
        let after = &rest[at + " (line ".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
    allow: Vec<Allow>,
}

/// Nanosecond timestamps, distinct per point so InfluxDB's last-write-wins never applies.
fn ts(i: u64) -> u64 {
    1_700_000_000_000_000_000 + i
}

fn write(name: &'static str, path: &'static str, body: String, allow: Vec<Allow>) -> Case {
    Case {
        name,
        method: "POST",
        path,
        headers: vec![],
        body: body.into_bytes(),
        allow,
    }
}

fn query(name: &'static str, statement: &str) -> Case {
    let form = serde_urlencoded::to_string([("q", statement)]).expect("urlencode a statement");
    Case {
        name,
        method: "POST",
        path: "/query",
        headers: vec![("Content-Type", "application/x-www-form-urlencoded")],
        body: form.into_bytes(),
        allow: vec![],
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}

fn cases() -> Vec<Case> {
    use Allow::*;
    let rp404 = UnknownRetentionPolicy404 {
        db: "d",
        rp: "nope",
    };
    let oversize: String = (0..MAX_BODY / 10 + 100)
        .map(|i| format!("big v={} {}\n", i % 10, ts(9000)))
        .collect();
    assert!(oversize.len() > MAX_BODY);
    vec![
        query("CREATE DATABASE d", "CREATE DATABASE d"),
        query(
            "CREATE DATABASE d2 WITH DURATION 1d NAME short",
            "CREATE DATABASE d2 WITH DURATION 1d NAME short",
        ),
        write(
            "valid write",
            "/write?db=d",
            format!("cpu,host=a v=1 {}\ncpu,host=b v=2 {}", ts(1), ts(1)),
            vec![],
        ),
        Case {
            name: "valid gzip write",
            method: "POST",
            path: "/write?db=d",
            headers: vec![("Content-Encoding", "gzip")],
            body: gzip(format!("cpu,host=gz v=1 {}\n", ts(2)).as_bytes()),
            allow: vec![],
        },
        write(
            "partial write (line without fields)",
            "/write?db=d",
            format!("cpu,host=a v=3 {}\nmem\ncpu,host=c v=4 {}", ts(3), ts(3)),
            vec![LineNumbers, TrueDroppedCount(1)],
        ),
        write(
            "partial write (missing field value)",
            "/write?db=d",
            format!("cpu,host=a v=5 {}\ncpu,host=a v= {}", ts(4), ts(5)),
            vec![LineNumbers, TrueDroppedCount(1)],
        ),
        write(
            "all lines bad (one line)",
            "/write?db=d",
            "garbage".into(),
            vec![LineNumbers],
        ),
        write(
            "all lines bad (two lines)",
            "/write?db=d",
            "mem\ngarbage".into(),
            vec![LineNumbers],
        ),
        write(
            "type conflict: float first",
            "/write?db=d",
            format!("m v=1.5 {}", ts(1)),
            vec![],
        ),
        write(
            "type conflict: integer after float",
            "/write?db=d",
            format!("m v=2i {}", ts(2)),
            vec![LineNumbers],
        ),
        write(
            "type conflict: int, float, string",
            "/write?db=d",
            format!("m v=3i {}\nm v=4 {}\nm v=\"x\" {}", ts(3), ts(4), ts(5)),
            vec![LineNumbers],
        ),
        write(
            "field named time",
            "/write?db=d",
            format!("cpu,host=t time=1 {}", ts(6)),
            vec![LineNumbers],
        ),
        write(
            "unknown database",
            "/write?db=nope",
            format!("cpu v=1 {}", ts(7)),
            vec![],
        ),
        write(
            "no database",
            "/write",
            format!("cpu v=1 {}", ts(7)),
            vec![],
        ),
        write(
            "unknown retention policy",
            "/write?db=d&rp=nope",
            format!("cpu v=1 {}", ts(7)),
            vec![rp404],
        ),
        write(
            "bad precision",
            "/write?db=d&precision=xx",
            "precision_probe v=1 1".into(),
            vec![],
        ),
        write(
            "body over max-body-size",
            "/write?db=d",
            oversize,
            vec![TooLargeNamesLimit],
        ),
        Case {
            name: "malformed gzip",
            method: "POST",
            path: "/write?db=d",
            headers: vec![("Content-Encoding", "gzip")],
            body: b"this is not gzip".to_vec(),
            allow: vec![GzipWording],
        },
        write("empty body", "/write?db=d", String::new(), vec![]),
        write(
            "v2 write bucket=d/autogen",
            "/api/v2/write?org=x&bucket=d/autogen",
            format!("cpu,host=v2 v=6 {}", ts(8)),
            vec![],
        ),
        write(
            "v2 write bucket=d",
            "/api/v2/write?org=x&bucket=d",
            format!("cpu,host=v2 v=7 {}", ts(9)),
            vec![],
        ),
        write(
            "v2 unknown retention policy",
            "/api/v2/write?org=x&bucket=d/nope",
            format!("cpu,host=v2 v=8 {}", ts(10)),
            vec![rp404],
        ),
        write(
            "v2 bad precision",
            "/api/v2/write?org=x&bucket=d&precision=xx",
            "precision_probe v=2 2".into(),
            vec![],
        ),
        query("SHOW DATABASES", "SHOW DATABASES"),
        query(
            "SHOW RETENTION POLICIES ON d",
            "SHOW RETENTION POLICIES ON d",
        ),
        query(
            "SHOW RETENTION POLICIES ON d2",
            "SHOW RETENTION POLICIES ON d2",
        ),
        query(
            "SHOW RETENTION POLICIES ON nope",
            "SHOW RETENTION POLICIES ON nope",
        ),
        Case {
            name: "ping",
            method: "GET",
            path: "/ping",
            headers: vec![],
            body: vec![],
            allow: vec![],
        },
    ]
}

enum Verdict {
    Same,
    Allowed(Vec<&'static str>),
    Diff,
}

fn readme_text() -> String {
    // Where cargo runs the test from, not where it was compiled (a shared target directory).
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let path = PathBuf::from(dir).join("../README.md");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One stored point of database `d`, as `(time in ns, host tag or "", field v)`.
type Row = (i64, String, f64);

/// Every point InfluxDB holds for `measurement` in database `d`, sorted.
fn influx_rows(influxd: &Influxd, measurement: &str) -> Vec<Row> {
    let q = serde_urlencoded::to_string([
        ("db", "d"),
        ("epoch", "ns"),
        ("q", &format!("SELECT * FROM \"{measurement}\"")),
    ])
    .expect("urlencode a query");
    let r = influxd.request("GET", &format!("/query?{q}"), &[], b"");
    let context = format!(
        "influxd SELECT * FROM {measurement}: {} {}",
        r.status, r.body
    );
    assert_eq!(r.status, 200, "{context}");
    let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{context}: {e}"));
    let series = &v["results"][0]["series"][0];
    let columns: Vec<&str> = series["columns"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no columns"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let col = |name: &str| columns.iter().position(|c| *c == name);
    let (time, v_col) = match (col("time"), col("v")) {
        (Some(t), Some(v)) => (t, v),
        _ => panic!("{context}: no time or v column"),
    };
    let host = col("host");
    let mut rows: Vec<Row> = series["values"]
        .as_array()
        .unwrap_or_else(|| panic!("{context}: no values"))
        .iter()
        .map(|row| {
            (
                row[time]
                    .as_i64()
                    .unwrap_or_else(|| panic!("{context}: time")),
                host.and_then(|h| row[h].as_str()).unwrap_or("").to_string(),
                row[v_col]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{context}: v")),
            )
        })
        .collect();
    rows.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    rows
}

/// Every point sluice holds for `measurement` in database `d`, sorted.
fn sluice_rows(sluice: &Server, measurement: &str) -> Vec<Row> {
    let body = sluice.sql(&format!(
        "SELECT toUnixTimestamp64Nano(c.time), s.tags['host'], c.v FROM d_autogen_{measurement} AS c \
         JOIN (SELECT DISTINCT series_id, tags FROM sluice_series WHERE db = 'd' AND measurement = '{measurement}') AS s \
         USING series_id FORMAT TSV"
    ));
    let mut rows: Vec<Row> = body
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            match (
                f.first().and_then(|t| t.parse().ok()),
                f.get(1),
                f.get(2).and_then(|v| v.parse().ok()),
            ) {
                (Some(t), Some(h), Some(v)) => (t, h.to_string(), v),
                _ => panic!("sluice {measurement}: unexpected row {line:?}"),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    rows
}

#[test]
fn answers_match_influxdb_1_8() {
    let readme = readme_text();
    let influxd = Influxd::start();
    let sluice = Server::start(&[
        ("SLUICE_LIMITS_MAX_BODY_BYTES", "64KiB"),
        ("SLUICE_AUTO_CREATE_DATABASES", "false"),
    ]);

    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for case in cases() {
        for allow in &case.allow {
            for quote in allow.readme() {
                assert!(
                    readme.contains(quote),
                    "case {:?}: allowance {allow:?} is not documented: README.md no longer says {quote:?}",
                    case.name
                );
            }
        }
        let ping = case.path == "/ping";
        let influx = Answer::from(
            &influxd.request(case.method, case.path, &case.headers, &case.body),
            ping,
        );
        let sluice_raw = Answer::from(
            &sluice.request(case.method, case.path, &case.headers, &case.body),
            ping,
        );
        let mut normalised = sluice_raw.clone();
        let applied: Vec<&'static str> = case
            .allow
            .iter()
            .filter(|a| a.apply(&influx, &mut normalised))
            .map(|a| a.label())
            .collect();
        let verdict = if normalised != influx {
            failures.push(format!(
                "{}: {} {}\n    influxd: {}\n    sluice:  {}",
                case.name,
                case.method,
                case.path,
                influx.show(),
                sluice_raw.show()
            ));
            Verdict::Diff
        } else if applied.is_empty() {
            Verdict::Same
        } else {
            Verdict::Allowed(applied)
        };
        rows.push((case.name, influx.show(), sluice_raw.show(), verdict));
    }

    println!(
        "\n{:<40} | {:<12} | influxd 1.8.10 / sluice",
        "case", "verdict"
    );
    println!("{}", "-".repeat(120));
    for (name, influx, sluice, verdict) in &rows {
        let verdict = match verdict {
            Verdict::Same => "same".to_string(),
            Verdict::Allowed(labels) => format!("allowed: {}", labels.join(", ")),
            Verdict::Diff => "DIFFERENT".to_string(),
        };
        println!("{name:<40} | {verdict:<12} | influxd: {influx}");
        println!("{:<40} | {:<12} | sluice:  {sluice}", "", "");
    }

    // InfluxDB 1.8 answers 400 to a bad precision and then writes the body anyway
    // (serveWriteV1/serveWriteV2 do not return after the error); sluice writes nothing.
    let probe = influx_rows(&influxd, "precision_probe");
    println!("points InfluxDB stored despite answering 400 (bad precision): {probe:?}");
    let exists = sluice.sql("EXISTS TABLE d_autogen_precision_probe FORMAT TSV");
    if exists.trim() != "0" {
        failures.push(format!(
            "bad precision: sluice answered 400 but created d_autogen_precision_probe: EXISTS = {exists:?}"
        ));
    }

    // Both stored the same points: the valid lines of every (partial) write, nothing else.
    for measurement in ["cpu", "m"] {
        let want = influx_rows(&influxd, measurement);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = sluice_rows(&sluice, measurement);
        while got != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            got = sluice_rows(&sluice, measurement);
        }
        println!(
            "points in d.autogen.{measurement}: influxd {}, sluice {}",
            want.len(),
            got.len()
        );
        if got != want {
            failures.push(format!(
                "stored points of d.autogen.{measurement} (time, host, v):\n    influxd: {want:?}\n    sluice:  {got:?}"
            ));
        }
    }

    assert!(
        failures.is_empty(),
        "{} differences from InfluxDB 1.8 beyond the README's deliberate ones:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn strip_line_numbers_removes_only_line_markers() {
    assert_eq!(strip_line_numbers("a (line 3) dropped=1"), "a dropped=1");
    assert_eq!(strip_line_numbers("x (line 1)\ny (line 22)"), "x\ny");
    assert_eq!(
        strip_line_numbers("keep (line x) and (line )"),
        "keep (line x) and (line )"
    );
}
