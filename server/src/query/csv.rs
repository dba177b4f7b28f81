//! `Accept: application/csv` (or `text/csv`): the answer as InfluxDB 1.8 writes it in CSV, for
//! exports with `curl`. Each statement's series under a header `name,tags,<columns>` (again
//! when the columns change, after a blank line, and a blank line between statements); the
//! tags as a series key (`host=a,region=eu`, escaped as line protocol escapes them, empty
//! values left out); times as integers (nanoseconds unless `epoch` says otherwise); missing
//! values empty; numbers in full, never with an exponent. As in InfluxDB, a statement's error
//! is not in the CSV (only a query that does not parse answers `error` and its message).

use serde_json::Value;

use super::answer::Outcome;

/// The CSV of `results`.
pub fn answer(results: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut statement: Option<u64> = None;
    for r in results {
        let (id, series) = series_of(r);
        let Some(first) = series.first() else {
            continue;
        };
        if statement.is_some() {
            out.push(b'\n');
        }
        statement = Some(id);
        header(&mut out, &first["columns"]);
        let mut columns = &first["columns"];
        for s in &series {
            if &s["columns"] != columns {
                out.push(b'\n');
                header(&mut out, &s["columns"]);
                columns = &s["columns"];
            }
            let name = s["name"].as_str().unwrap_or("");
            let key = series_key(&s["tags"]);
            for row in s["values"].as_array().into_iter().flatten() {
                let mut fields = vec![name.to_string(), key.clone()];
                fields.extend(row.as_array().into_iter().flatten().map(cell));
                record(&mut out, &fields);
            }
        }
    }
    out
}

/// The CSV of a query that does not parse.
pub fn error(message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    record(&mut out, &["error".to_string()]);
    record(&mut out, &[message.to_string()]);
    out
}

/// A result's statement id and its series as values (a `SELECT`'s are JSON text).
fn series_of(r: &Outcome) -> (u64, Vec<Value>) {
    match r {
        Outcome::Value(v) => (
            v["statement_id"].as_u64().unwrap_or(0),
            v["series"].as_array().cloned().unwrap_or_default(),
        ),
        Outcome::Series { id, series, .. } => (
            *id as u64,
            series
                .iter()
                .filter_map(|s| serde_json::from_slice(s).ok())
                .collect(),
        ),
    }
}

fn header(out: &mut Vec<u8>, columns: &Value) {
    let mut fields = vec!["name".to_string(), "tags".to_string()];
    fields.extend(columns.as_array().into_iter().flatten().map(cell));
    record(out, &fields);
}

/// The tags as InfluxDB's series key: sorted by key, empty values left out, commas, spaces
/// and equals signs escaped with a backslash.
fn series_key(tags: &Value) -> String {
    let Some(map) = tags.as_object() else {
        return String::new();
    };
    let mut pairs: Vec<(&String, &str)> = map
        .iter()
        .filter_map(|(k, v)| v.as_str().filter(|v| !v.is_empty()).map(|v| (k, v)))
        .collect();
    pairs.sort();
    let escape = |s: &str| {
        let mut e = String::with_capacity(s.len());
        for c in s.chars() {
            if matches!(c, ',' | ' ' | '=') {
                e.push('\\');
            }
            e.push(c);
        }
        e
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A value as InfluxDB's CSV writes it: floats in full decimal (Go's `FormatFloat(v, 'f', -1,
/// 64)`, which Rust's `Display` of an `f64` matches), missing values empty.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One CSV line, each field quoted as Go's `encoding/csv` quotes it: when it holds a comma, a
/// quote or a line break, or starts with a space.
fn record(out: &mut Vec<u8>, fields: &[String]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let quote = f.contains([',', '"', '\r', '\n'])
            || f.chars().next().is_some_and(char::is_whitespace)
            || f == "\\.";
        if quote {
            out.push(b'"');
            out.extend_from_slice(f.replace('"', "\"\"").as_bytes());
            out.push(b'"');
        } else {
            out.extend_from_slice(f.as_bytes());
        }
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn series_statements_and_escapes_as_influxdb_writes_them() {
        let select = Outcome::Series {
            id: 0,
            series: vec![
                serde_json::to_vec(&json!({"name": "esc", "columns": ["time", "s", "v"],
                    "values": [[4, null, 1e-7]]}))
                .unwrap(),
                serde_json::to_vec(&json!({"name": "esc", "tags": {"t": "a b", "u": "x,y", "w": ""},
                    "columns": ["time", "s", "v"], "values": [[2, "q\"uote, comma", 1e21], [3, " lead", true]]}))
                .unwrap(),
                serde_json::to_vec(&json!({"name": "esc", "columns": ["time", "n"], "values": [[5, 7]]}))
                .unwrap(),
            ],
            messages: None,
        };
        let empty = Outcome::Value(json!({"statement_id": 1}));
        let failed =
            Outcome::Value(json!({"statement_id": 2, "error": "undefined function bad()"}));
        let listing = Outcome::Value(json!({"statement_id": 3, "series": [
            {"name": "measurements", "columns": ["name"], "values": [["cpu"], ["mem"]]}]}));
        let got = answer(&[select, empty, failed, listing]);
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "name,tags,time,s,v\n\
             esc,,4,,0.0000001\n\
             esc,\"t=a\\ b,u=x\\,y\",2,\"q\"\"uote, comma\",1000000000000000000000\n\
             esc,\"t=a\\ b,u=x\\,y\",3,\" lead\",true\n\
             \n\
             name,tags,time,n\n\
             esc,,5,7\n\
             \n\
             name,tags,name\n\
             measurements,,cpu\n\
             measurements,,mem\n"
        );
    }

    #[test]
    fn a_parse_error_is_its_own_record() {
        assert_eq!(
            String::from_utf8(error("found syntax, expected FROM")).unwrap(),
            "error\n\"found syntax, expected FROM\"\n"
        );
    }
}
