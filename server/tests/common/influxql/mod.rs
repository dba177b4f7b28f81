//! What the InfluxQL tests share: a small data set (`cpu` and `mem` in database `g`) and the
//! `/query` requests Grafana's InfluxDB data source sends over it, compared as JSON.

use serde_json::Value;

use super::influxd::Influxd;
use super::{Resp, Server};

pub mod cases;

/// 2020-08-01T00:00:00Z, in seconds.
pub const T0: i64 = 1_596_240_000;

/// Points of database `g`: `cpu` (hosts h1-h3, h3 without `dc`; float `value`, integer `n`;
/// every 10 s for 10 minutes, with holes: h1 has nothing in minute 4, h2 skips every seventh
/// point, its last among them), `mem` (h1 only; integer `used`, float `free`) and `disk`
/// (series whose last points differ by field and by series: h1's `free` ends 30 s before its
/// `used`, h2 stops after 5 minutes).
pub fn points() -> String {
    let mut lines = Vec::new();
    for i in 0..60i64 {
        let t = T0 + i * 10;
        for (h, dc) in [("h1", Some("a")), ("h2", Some("b")), ("h3", None)] {
            if (h == "h1" && (24..30).contains(&i)) || (h == "h2" && i % 7 == 3) {
                continue;
            }
            let tags = match dc {
                Some(dc) => format!("dc={dc},host={h}"),
                None => format!("host={h}"),
            };
            let hv = h.as_bytes()[1] as i64 - b'0' as i64;
            let value = (i * 37 + hv * 11) % 100;
            lines.push(format!(
                "cpu,{tags} value={}.{},n={}i {t}",
                value,
                (i * hv) % 10,
                i % 5 + hv
            ));
        }
        let free = if i < 57 {
            format!(",free={}.5", i % 9)
        } else {
            String::new()
        };
        lines.push(format!("disk,host=h1 used={}i{free} {t}", 100 + i % 13));
        if i < 30 {
            lines.push(format!(
                "disk,host=h2 used={}i,free={}.5 {t}",
                200 - i,
                i % 4
            ));
        }
        if i % 2 == 0 {
            lines.push(format!(
                "mem,host=h1 used={}i,free={}.25 {t}",
                1000 + i,
                50 - i / 2
            ));
        }
    }
    lines.extend(live_points());
    lines.join("\n")
}

/// `live`: series whose last points are recent and old, for `last()`'s first pass, which
/// reads the last minutes of every series and only the others in full. Host `a` has both
/// fields in the last 5 minutes, `b` only `v` there (its last `w` is an hour old), `c`
/// stopped two hours ago and `d` in 2020.
fn live_points() -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
        / 10
        * 10;
    let mut lines = Vec::new();
    for i in 0..30i64 {
        lines.push(format!(
            "live,host=a v={i}.5,w={}i {}",
            100 - i,
            now - 10 * i
        ));
        lines.push(format!("live,host=b v={}.25 {}", 40 + i, now - 10 * i));
    }
    for i in 0..10i64 {
        lines.push(format!(
            "live,host=b w={}i {}",
            200 + i,
            now - 3600 - 10 * i
        ));
        lines.push(format!(
            "live,host=c v={i}.75,w={i}i {}",
            now - 7200 - 10 * i
        ));
        lines.push(format!(
            "live,host=d v={}.5,w={}i {}",
            9 - i,
            50 + i,
            T0 + 10 * i
        ));
    }
    lines
}

/// Writes [`points`] to database `g` of both servers and waits until sluice has flushed them
/// all (its reads see only flushed points).
pub fn load(influxd: &Influxd, sluice: &Server) {
    let body = points();
    let create = "/query?q=CREATE%20DATABASE%20g";
    assert_eq!(influxd.request("POST", create, &[], b"").status, 200);
    assert_eq!(sluice.request("POST", create, &[], b"").status, 200);
    let w = influxd.request("POST", "/write?db=g&precision=s", &[], body.as_bytes());
    assert_eq!(w.status, 204, "influxd write: {}", w.body);
    let w = sluice.write("db=g&precision=s", &body);
    assert_eq!(w.status, 204, "sluice write: {}", w.body);
    for m in ["cpu", "mem", "disk", "live"] {
        let n = body
            .lines()
            .filter(|l| l.starts_with(&format!("{m},")))
            .count();
        sluice.wait_sql(
            &format!("SELECT count() FROM g_autogen_{m}"),
            &n.to_string(),
        );
    }
}

pub fn ms(s: i64) -> String {
    format!("{}ms", s * 1000)
}

/// The relative difference [`fitted_queries`] may have.
pub const FITTED: f64 = 1e-6;

/// The same request's answers from two servers: status and JSON each.
pub type Answers = ((u16, Value), (u16, Value));

/// The two answers `ask` gets, asked for once more when they differ beyond `tolerance`: a
/// statement whose buckets run up to now() (an outer `GROUP BY time` without a time condition
/// of its own) answers one bucket more when a bucket's boundary passes between the two
/// requests. A real difference is there the second time too.
pub fn settled(ask: &dyn Fn() -> Answers, tolerance: f64) -> Answers {
    let first = ask();
    if first.0 .0 == first.1 .0 && same_within(&first.0 .1, &first.1 .1, tolerance) {
        return first;
    }
    ask()
}

/// Equal JSON, numbers within `tolerance` relative (at least `tolerance` x 1e-3 absolute).
pub fn same_within(a: &Value, b: &Value, tolerance: f64) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            // Relative, down to an absolute floor: a difference of two nearly equal sums
            // (1e-15 for one, 4e-15 for the other) is rounding, not a different answer.
            x == y || (x - y).abs() <= tolerance * x.abs().max(y.abs()).max(1e-3)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_within(a, b, tolerance))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_within(v, w, tolerance)))
        }
        _ => a == b,
    }
}

pub fn get(base: &dyn Fn(&str) -> Resp, q: &str) -> (u16, Value) {
    let path = format!(
        "/query?{}",
        serde_urlencoded::to_string([("db", "g"), ("epoch", "ms"), ("q", q)]).expect("encode")
    );
    let r = base(&path);
    let v = serde_json::from_str(r.body.trim()).unwrap_or(Value::String(r.body.clone()));
    (r.status, v)
}

/// Whether no column after the time has a value in both rows.
fn complementary(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return false;
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .skip(1)
            .all(|(x, y)| x.is_null() || y.is_null())
}

/// An answer with each statement's series of equal name and tags made one (their values in
/// time order, rows of one time that split its columns made one) and the series in name and
/// tag order.
pub fn regrouped(answer: &Value) -> Value {
    let mut answer = answer.clone();
    let Some(results) = answer.get_mut("results").and_then(Value::as_array_mut) else {
        return answer;
    };
    for result in results {
        let Some(series) = result.get_mut("series").and_then(Value::as_array_mut) else {
            continue;
        };
        let mut merged: Vec<Value> = Vec::new();
        for s in series.drain(..) {
            let same_series = |m: &Value| m["name"] == s["name"] && m["tags"] == s["tags"];
            match merged.iter_mut().find(|m| same_series(m)) {
                Some(m) => {
                    let more = s["values"].as_array().cloned().unwrap_or_default();
                    if let Some(values) = m["values"].as_array_mut() {
                        values.extend(more);
                    }
                }
                None => merged.push(s),
            }
        }
        for m in &mut merged {
            if let Some(values) = m["values"].as_array_mut() {
                values.sort_by_key(|row| row[0].as_i64());
                // Rows of one time that split one row's columns between them (each integral's
                // last bucket comes on its own) are one row.
                let mut rows: Vec<Value> = Vec::new();
                for row in values.drain(..) {
                    match rows.last_mut() {
                        Some(last) if last[0] == row[0] && complementary(last, &row) => {
                            for (i, v) in row.as_array().into_iter().flatten().enumerate() {
                                if !v.is_null() {
                                    last[i] = v.clone();
                                }
                            }
                        }
                        _ => rows.push(row),
                    }
                }
                *values = rows;
            }
        }
        merged.sort_by_key(|m| (m["name"].to_string(), m["tags"].to_string()));
        *series = merged;
    }
    answer
}
