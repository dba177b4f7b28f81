//! The engine's rows cut into InfluxDB's answer: series of `name`, `tags`, `columns` and
//! `values`, with `time` as the request's epoch asks.
//!
//! Rows come as `JSONCompactEachRowWithNamesAndTypes` (a line of names, a line of types, then
//! one JSON array per row). The reader connections are read-only and cannot change output
//! settings, so 64-bit integers arrive quoted; the types line says which to turn back into
//! numbers.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::time::time_value;

/// The rows of one answer, parsed.
pub struct Rows {
    pub rows: Vec<Vec<Value>>,
}

/// Parses the engine's output; an error names the line that is not what was asked for.
///
/// A plan's row whose tags are empty is no row: a plan's tags are a JSON object, and only
/// `WITH FILL` over no rows at all makes such rows (the column's default), which InfluxDB
/// answers as no series.
pub fn parse_rows(out: &[u8]) -> Result<Rows, String> {
    let Some((names, types, lines)) = lines_of(out)? else {
        return Ok(Rows { rows: vec![] });
    };
    let types: Vec<String> =
        serde_json::from_str(types).map_err(|e| format!("engine output, types line: {e}"))?;
    let planned = names.starts_with("[\"__sl_tags\"");
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut row: Vec<Value> =
            serde_json::from_str(line).map_err(|e| format!("engine output, row {i}: {e}"))?;
        if planned && row.first().is_some_and(|t| t.as_str() == Some("")) {
            continue;
        }
        for (v, t) in row.iter_mut().zip(&types) {
            unquote_integer(v, t);
        }
        rows.push(row);
    }
    Ok(Rows { rows })
}

/// The engine's output as its names line, its types line and its rows' lines (`None` when it
/// is empty).
fn lines_of(out: &[u8]) -> Result<Option<(&str, &str, impl Iterator<Item = &str>)>, String> {
    let text = std::str::from_utf8(out).map_err(|e| format!("engine output is not UTF-8: {e}"))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let (Some(names), Some(types)) = (lines.next(), lines.next()) else {
        return Ok(None);
    };
    // The engine starts each block of a streamed answer with the names and types again when
    // the query fills gaps (`WITH FILL`): those lines are not rows.
    Ok(Some((
        names,
        types,
        lines.filter(move |l| *l != names && *l != types),
    )))
}

/// One row of `(measurement, key, value)`, its strings borrowed from the engine's output
/// unless they hold an escape.
#[derive(serde::Deserialize)]
struct KeyValueRow<'a>(
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
);

/// `SHOW TAG VALUES`' rows `(measurement, key, value)`, sorted by measurement, written as a
/// series per measurement (columns `key` and `value`), `offset` and `limit` applied to each.
///
/// Written straight from the engine's output: 10,000 values parsed into a tree of JSON
/// values, regrouped and written again took about 4 ms of the 20 ms such a listing takes on
/// one pod, and held every value three times over.
pub fn key_value_series(
    out: &[u8],
    limit: Option<u64>,
    offset: Option<u64>,
) -> Result<Vec<Vec<u8>>, String> {
    let json = |e: serde_json::Error| format!("writing the answer: {e}");
    let mut series = Vec::new();
    let Some((_, _, lines)) = lines_of(out)? else {
        return Ok(series);
    };
    let (skip, take) = (offset.unwrap_or(0), limit.unwrap_or(u64::MAX));
    let mut current: Option<Listing> = None;
    for (i, line) in lines.enumerate() {
        let KeyValueRow(m, k, v) =
            serde_json::from_str(line).map_err(|e| format!("engine output, row {i}: {e}"))?;
        let l = match &mut current {
            Some(l) if l.measurement == m => l,
            _ => {
                if let Some(done) = current.take() {
                    done.finish(&mut series);
                }
                let mut json_so_far = b"{\"name\":".to_vec();
                serde_json::to_writer(&mut json_so_far, &m).map_err(json)?;
                json_so_far.extend_from_slice(b",\"columns\":[\"key\",\"value\"],\"values\":[");
                current.insert(Listing {
                    measurement: m.into_owned(),
                    json: json_so_far,
                    seen: 0,
                    written: 0,
                })
            }
        };
        l.seen += 1;
        if l.seen <= skip || l.written >= take {
            continue;
        }
        if l.written > 0 {
            l.json.push(b',');
        }
        l.written += 1;
        l.json.push(b'[');
        serde_json::to_writer(&mut l.json, &k).map_err(json)?;
        l.json.push(b',');
        serde_json::to_writer(&mut l.json, &v).map_err(json)?;
        l.json.push(b']');
    }
    if let Some(done) = current {
        done.finish(&mut series);
    }
    Ok(series)
}

/// The measurement [`key_value_series`] is writing: its JSON so far, its rows seen and its
/// rows written.
struct Listing {
    measurement: String,
    json: Vec<u8>,
    seen: u64,
    written: u64,
}

impl Listing {
    /// Ends the series; a measurement whose rows all fall before the offset has none.
    fn finish(self, series: &mut Vec<Vec<u8>>) {
        if self.written > 0 {
            series.push(close(self.json));
        }
    }
}

/// `"123"` of an `Int64`/`UInt64` (possibly `Nullable`) column as the number 123.
fn unquote_integer(v: &mut Value, ty: &str) {
    let inner = ty
        .strip_prefix("Nullable(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(ty);
    if !matches!(inner, "Int64" | "UInt64" | "Int128" | "UInt128") {
        return;
    }
    if let Value::String(s) = v {
        if let Ok(n) = s.parse::<i64>() {
            *v = Value::from(n);
        } else if let Ok(n) = s.parse::<u64>() {
            *v = Value::from(n);
        }
    }
}

/// Appends the series of one measurement's rows (`tags`, `time`, values...) to `out`, each
/// written as InfluxDB's JSON object (`name`, `tags`, `columns`, `values`): a new series where
/// the tags change. The tags are the engine's JSON object of the grouping tags, which the plan
/// builds sorted by key; it is copied as it is unless it holds an escape, which is written
/// again as InfluxDB writes it (the engine escapes `/`).
pub fn series(
    measurement: &str,
    columns: &[String],
    tagged: bool,
    rows: Rows,
    epoch: Option<i64>,
    out: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    let json = |e: serde_json::Error| format!("writing the answer: {e}");
    let mut head = b"{\"name\":".to_vec();
    serde_json::to_writer(&mut head, measurement).map_err(json)?;
    let mut cols = b",\"columns\":".to_vec();
    serde_json::to_writer(&mut cols, columns).map_err(json)?;
    cols.extend_from_slice(b",\"values\":[");
    // The series being written: its tags as the engine gave them, and its JSON so far.
    let mut current: Option<(String, Vec<u8>)> = None;
    for row in rows.rows {
        let mut it = row.into_iter();
        let (Some(tags), Some(time)) = (it.next(), it.next()) else {
            return Err("engine output: a row without tags and time".into());
        };
        let tags = match tags {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let ns = time
            .as_i64()
            .ok_or_else(|| format!("engine output: time {time} is not an integer"))?;
        let buf = match &mut current {
            Some((t, buf)) if *t == tags => {
                buf.push(b',');
                buf
            }
            _ => {
                if let Some((_, done)) = current.take() {
                    out.push(close(done));
                }
                let mut buf = head.clone();
                if tagged {
                    buf.extend_from_slice(b",\"tags\":");
                    write_tags(&tags, &mut buf)?;
                }
                buf.extend_from_slice(&cols);
                &mut current.insert((tags, buf)).1
            }
        };
        buf.push(b'[');
        serde_json::to_writer(&mut *buf, &time_value(ns, epoch)).map_err(json)?;
        for v in it {
            buf.push(b',');
            serde_json::to_writer(&mut *buf, &finite(v)).map_err(json)?;
        }
        buf.push(b']');
    }
    if let Some((_, done)) = current {
        out.push(close(done));
    }
    Ok(())
}

/// Ends a series' `values` and object.
fn close(mut buf: Vec<u8>) -> Vec<u8> {
    buf.extend_from_slice(b"]}");
    buf
}

/// Writes the engine's JSON object of tags: as it is when it holds no escape, else parsed and
/// written again. Either way it must be a JSON object.
fn write_tags(tags: &str, buf: &mut Vec<u8>) -> Result<(), String> {
    let bad = |e: String| format!("engine output, tags {tags:?}: {e}");
    if !tags.starts_with('{') {
        return Err(bad("not a JSON object".into()));
    }
    if tags.contains('\\') {
        let t: Map<String, Value> = serde_json::from_str(tags).map_err(|e| bad(e.to_string()))?;
        serde_json::to_writer(&mut *buf, &t).map_err(|e| bad(e.to_string()))?;
    } else {
        serde_json::from_str::<serde::de::IgnoredAny>(tags).map_err(|e| bad(e.to_string()))?;
        buf.extend_from_slice(tags.as_bytes());
    }
    Ok(())
}

/// NaN and infinities (a `stddev` of one point) are `null` in InfluxDB's JSON; the engine
/// writes them as strings or `null` depending on the format.
fn finite(v: Value) -> Value {
    match &v {
        Value::String(s) if matches!(s.as_str(), "nan" | "inf" | "-inf" | "NaN") => Value::Null,
        _ => v,
    }
}

/// `SLIMIT`/`SOFFSET` over a statement's series.
pub fn limit_series<T>(series: &mut Vec<T>, slimit: Option<u64>, soffset: Option<u64>) {
    let skip = soffset.unwrap_or(0) as usize;
    if skip > 0 {
        series.drain(..skip.min(series.len()));
    }
    if let Some(n) = slimit {
        series.truncate(n as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &[u8] = br#"["__sl_tags","__sl_t","__sl_c0"]
["String","Int64","Nullable(Int64)"]
["{\"host\":\"a\"}","1000000","7"]
["{\"host\":\"a\"}","2000000",null]
["{\"host\":\"b\"}","1000000","-3"]
"#;

    /// The series written, read back.
    fn parsed(out: &[Vec<u8>]) -> Vec<Value> {
        out.iter()
            .map(|s| serde_json::from_slice(s).unwrap())
            .collect()
    }

    #[test]
    fn rows_become_series_per_tag_set() {
        let rows = parse_rows(OUT).unwrap();
        let mut out = Vec::new();
        let cols = vec!["time".to_string(), "count".to_string()];
        series("cpu", &cols, true, rows, Some(1_000_000), &mut out).unwrap();
        assert_eq!(
            Value::Array(parsed(&out)),
            serde_json::json!([
                {"name": "cpu", "tags": {"host": "a"}, "columns": ["time", "count"], "values": [[1, 7], [2, null]]},
                {"name": "cpu", "tags": {"host": "b"}, "columns": ["time", "count"], "values": [[1, -3]]}
            ])
        );
    }

    #[test]
    fn untagged_series_and_rfc3339_time() {
        let rows = parse_rows(OUT).unwrap();
        let mut out = Vec::new();
        let cols = vec!["time".to_string(), "v".to_string()];
        series("m", &cols, false, rows, None, &mut out).unwrap();
        let out = parsed(&out);
        assert_eq!(out.len(), 2);
        assert!(out[0].get("tags").is_none());
        assert_eq!(out[0]["values"][0][0], "1970-01-01T00:00:00.001Z");
    }

    #[test]
    fn tags_with_escapes_are_written_as_influxdb_writes_them_and_garbage_is_an_error() {
        let rows = parse_rows(
            br#"["__sl_tags","__sl_t","__sl_c0"]
["String","Int64","Float64"]
["{\"path\":\"\\/var\\/log\",\"q\":\"a\\\"b\"}","1000000",1.5]
["{\"path\":\"\\/var\\/log\",\"q\":\"a\\\"b\"}","2000000","nan"]
"#,
        )
        .unwrap();
        let mut out = Vec::new();
        let cols = vec!["time".to_string(), "v".to_string()];
        series("m", &cols, true, rows, Some(1), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let text = String::from_utf8(out[0].clone()).unwrap();
        assert_eq!(
            text,
            r#"{"name":"m","tags":{"path":"/var/log","q":"a\"b"},"columns":["time","v"],"values":[[1000000,1.5],[2000000,null]]}"#
        );
        for bad in ["[1]", "{\"a\":", "x"] {
            let rows = Rows {
                rows: vec![vec![Value::from(bad), Value::from(1)]],
            };
            let err = series("m", &cols, true, rows, None, &mut Vec::new()).unwrap_err();
            assert!(err.contains("tags"), "{bad}: {err}");
        }
    }

    #[test]
    fn empty_output_is_no_series_and_garbage_is_an_error() {
        let mut out: Vec<Vec<u8>> = Vec::new();
        series("m", &[], false, parse_rows(b"").unwrap(), None, &mut out).unwrap();
        assert!(out.is_empty());
        assert!(parse_rows(b"[\"a\"]\n[\"String\"]\nnot json\n").is_err());
    }

    const TAG_VALUES: &[u8] = br#"["measurement","k","v"]
["String","String","String"]
["cpu","host","a"]
["cpu","host","b\/c"]
["cpu","host","d"]
["disk","host","a"]
["measurement","k","v"]
["String","String","String"]
["mem","host","x\"y"]
"#;

    #[test]
    fn tag_values_are_a_series_per_measurement_paged_each() {
        let all = key_value_series(TAG_VALUES, None, None).unwrap();
        assert_eq!(
            String::from_utf8(all[0].clone()).unwrap(),
            r#"{"name":"cpu","columns":["key","value"],"values":[["host","a"],["host","b/c"],["host","d"]]}"#
        );
        assert_eq!(
            Value::Array(parsed(&all[1..])),
            serde_json::json!([
                {"name": "disk", "columns": ["key", "value"], "values": [["host", "a"]]},
                {"name": "mem", "columns": ["key", "value"], "values": [["host", "x\"y"]]}
            ])
        );
        // OFFSET 1 LIMIT 1 per measurement: a measurement with one value has none left.
        let paged = parsed(&key_value_series(TAG_VALUES, Some(1), Some(1)).unwrap());
        assert_eq!(
            Value::Array(paged),
            serde_json::json!([
                {"name": "cpu", "columns": ["key", "value"], "values": [["host", "b/c"]]}
            ])
        );
        assert!(key_value_series(TAG_VALUES, Some(0), None)
            .unwrap()
            .is_empty());
        assert!(key_value_series(b"", None, None).unwrap().is_empty());
        let err = key_value_series(b"[\"a\"]\n[\"String\"]\n[\"cpu\",1]\n", None, None);
        assert!(err.unwrap_err().contains("row 0"));
    }

    /// `WITH FILL` over no rows fills the range with empty tags: no series.
    #[test]
    fn a_fills_rows_of_no_group_are_no_rows() {
        let out = br#"["__sl_tags","__sl_t","__sl_c0"]
["String","Int64","Nullable(Float64)"]
["","1000000",null]
["{\"host\":\"a\"}","1000000",1.5]
["","2000000",null]
"#;
        let rows = parse_rows(out).unwrap().rows;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], Value::from("{\"host\":\"a\"}"));
        assert_eq!(rows[0][1], Value::from(1_000_000));
        // Other answers' empty strings are values.
        let other = parse_rows(b"[\"key\",\"n\"]\n[\"String\",\"Int64\"]\n[\"\",\"1\"]\n").unwrap();
        assert_eq!(other.rows, vec![vec![Value::from(""), Value::from(1)]]);
    }

    #[test]
    fn repeated_names_and_types_lines_are_not_rows() {
        let mut twice = OUT.to_vec();
        twice.extend_from_slice(OUT);
        assert_eq!(parse_rows(&twice).unwrap().rows.len(), 6);
    }

    #[test]
    fn slimit_and_soffset() {
        let mut s: Vec<Value> = (0..5).map(Value::from).collect();
        limit_series(&mut s, Some(2), Some(1));
        assert_eq!(s, [Value::from(1), Value::from(2)]);
        limit_series(&mut s, None, Some(10));
        assert!(s.is_empty());
    }
}
