//! `chunked=true`: the answer as a stream of JSON objects, one line each, cut as InfluxDB 1.8
//! cuts it, so clients that read chunks (the `influx` shell, the Go and Python 1.x clients)
//! see the same pieces. InfluxDB's rules differ by statement ([`Chunking`]); each piece is
//! `{"results":[{"statement_id":N,"series":[...]}]}` with `partial` flags where more follows.
//!
//! The answer is computed whole first (within the query limits); the pieces are written from
//! it one at a time, so the repeated names, tags and columns of small chunks never sit in
//! memory together.

use std::collections::VecDeque;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_influxql::Statement;

use super::answer::Outcome;
use super::json_text::write_ordered;

/// Rows per chunk when `chunk_size` is absent or not a positive integer (InfluxDB's default).
pub const DEFAULT_CHUNK_SIZE: usize = 10_000;

/// The chunk size a request asks for: `chunk_size` as a positive integer, else the default.
pub fn chunk_size(param: Option<&str>) -> usize {
    param
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .map_or(DEFAULT_CHUNK_SIZE, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        })
}

/// How InfluxDB 1.8 cuts one statement's result into chunks (checked against influxd 1.8.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunking {
    /// One object whatever its size: the statements InfluxDB answers from its meta store
    /// (`SHOW DATABASES`, `SHOW RETENTION POLICIES`, `SHOW MEASUREMENTS`, `CREATE DATABASE`).
    Whole,
    /// One object per series, without `partial` flags: `SHOW TAG KEYS`, `SHOW TAG VALUES`.
    PerSeries,
    /// One object per `chunk_size` rows of each series; `partial` on a series that continues
    /// and on every object of the statement but its last: `SELECT`, `SHOW SERIES`, `SHOW FIELD
    /// KEYS` and the cardinalities, which InfluxDB runs through its query emitter.
    Rows,
}

impl Chunking {
    pub fn of(s: &Statement) -> Chunking {
        match s {
            Statement::Select(_)
            | Statement::ShowSeries(_)
            | Statement::ShowFieldKeys(_)
            | Statement::ShowCardinality(_) => Chunking::Rows,
            Statement::ShowTagKeys(_) | Statement::ShowTagValues(_) => Chunking::PerSeries,
            Statement::ShowDatabases
            | Statement::ShowRetentionPolicies { .. }
            | Statement::ShowMeasurements(_)
            | Statement::CreateDatabase(_)
            | Statement::Unsupported { .. } => Chunking::Whole,
        }
    }
}

/// The pieces of an answer, each a line of JSON (with its `\n`).
pub struct Chunks {
    results: std::vec::IntoIter<(Outcome, Chunking)>,
    size: usize,
    open: Option<Open>,
}

impl Chunks {
    /// `results` with the chunking of the statement each answers (a result without one, as
    /// for a query that failed before its statements ran, is whole).
    pub fn new(results: Vec<Outcome>, chunking: &[Chunking], size: usize) -> Chunks {
        let paired: Vec<(Outcome, Chunking)> = results
            .into_iter()
            .enumerate()
            .map(|(i, r)| (r, chunking.get(i).copied().unwrap_or(Chunking::Whole)))
            .collect();
        Chunks {
            results: paired.into_iter(),
            size: size.max(1),
            open: None,
        }
    }
}

impl Iterator for Chunks {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(open) = &mut self.open {
                if let Some(piece) = open.next_piece(self.size) {
                    return Some(piece);
                }
                self.open = None;
            }
            let (outcome, chunking) = self.results.next()?;
            match Open::of(outcome, chunking) {
                Ok(open) => self.open = Some(open),
                Err(whole) => return Some(whole),
            }
        }
    }
}

/// A statement whose series are being written piece by piece.
struct Open {
    id: usize,
    chunking: Chunking,
    /// Written with the statement's first piece only.
    messages: Option<Value>,
    series: VecDeque<Vec<u8>>,
    current: Option<Split>,
}

impl Open {
    /// The statement's pieces to come, or its one piece when it is not cut (an error, no
    /// series, or [`Chunking::Whole`]).
    fn of(outcome: Outcome, chunking: Chunking) -> Result<Open, Vec<u8>> {
        match outcome {
            Outcome::Value(v) => {
                let cut = chunking != Chunking::Whole
                    && v.get("error").is_none()
                    && v["series"].as_array().is_some_and(|s| !s.is_empty());
                if !cut {
                    return Err(line(|out| write_ordered(out, &v)));
                }
                let id = v["statement_id"].as_u64().unwrap_or(0) as usize;
                let series = v["series"]
                    .as_array()
                    .map(|s| s.iter().filter_map(ordered).collect())
                    .unwrap_or_default();
                Ok(Open {
                    id,
                    chunking,
                    messages: v.get("messages").cloned(),
                    series,
                    current: None,
                })
            }
            Outcome::Series {
                id,
                series,
                messages,
            } => {
                if series.is_empty() || chunking == Chunking::Whole {
                    let whole = Outcome::Series {
                        id,
                        series,
                        messages,
                    };
                    return Err(line(|out| whole.write(out)));
                }
                Ok(Open {
                    id,
                    chunking,
                    messages,
                    series: series.into(),
                    current: None,
                })
            }
        }
    }

    fn next_piece(&mut self, size: usize) -> Option<Vec<u8>> {
        let (series, series_partial) = match self.chunking {
            Chunking::Rows => {
                if self.current.is_none() {
                    self.current = Some(Split::of(self.series.pop_front()?));
                }
                let split = self.current.as_mut()?;
                let piece = split.take(size);
                let more = split.more();
                if !more {
                    self.current = None;
                }
                (piece, more)
            }
            Chunking::PerSeries | Chunking::Whole => (self.series.pop_front()?, false),
        };
        let result_partial = self.chunking == Chunking::Rows
            && (series_partial || self.current.is_some() || !self.series.is_empty());
        let messages = self.messages.take();
        Some(line(|out| {
            out.extend_from_slice(
                format!("{{\"statement_id\":{},\"series\":[", self.id).as_bytes(),
            );
            out.extend_from_slice(&series);
            out.push(b']');
            if let Some(m) = &messages {
                out.extend_from_slice(b",\"messages\":");
                write_ordered(out, m)?;
            }
            if result_partial {
                out.extend_from_slice(b",\"partial\":true");
            }
            out.push(b'}');
            Ok(())
        }))
    }
}

/// A series' JSON, keys in InfluxDB's order.
fn ordered(v: &Value) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    write_ordered(&mut out, v).ok().map(|()| out)
}

/// `{"results":[...]}` around what `write` writes, and a newline.
fn line(write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>) -> Vec<u8> {
    let mut out = b"{\"results\":[".to_vec();
    if let Err(e) = write(&mut out) {
        // Writing JSON into memory fails only for values JSON cannot hold; say so in the
        // piece rather than end the stream short.
        out.truncate(b"{\"results\":[".len());
        out.extend_from_slice(
            serde_json::json!({ "error": format!("writing the answer: {e}") })
                .to_string()
                .as_bytes(),
        );
    }
    out.extend_from_slice(b"]}\n");
    out
}

/// One series' JSON cut into pieces of its `values`.
struct Split {
    bytes: Vec<u8>,
    /// `"name":...,"tags":...,"columns":...`, as the series had them.
    head: Vec<u8>,
    values: Vec<Range<usize>>,
    next: usize,
    /// The series could not be read (it always can: sluice wrote it); written whole.
    whole: bool,
}

#[derive(Deserialize)]
struct RawSeries<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
    #[serde(borrow, default)]
    columns: Option<&'a RawValue>,
    #[serde(borrow, default)]
    values: Vec<&'a RawValue>,
}

impl Split {
    fn of(bytes: Vec<u8>) -> Split {
        let (head, values) = match serde_json::from_slice::<RawSeries>(&bytes) {
            Ok(raw) => {
                let base = bytes.as_ptr() as usize;
                let span = |r: &RawValue| {
                    let start = r.get().as_ptr() as usize - base;
                    start..start + r.get().len()
                };
                let mut head = Vec::new();
                for (key, v) in [
                    ("name", raw.name),
                    ("tags", raw.tags),
                    ("columns", raw.columns),
                ] {
                    if let Some(v) = v {
                        if !head.is_empty() {
                            head.push(b',');
                        }
                        head.extend_from_slice(format!("\"{key}\":").as_bytes());
                        head.extend_from_slice(v.get().as_bytes());
                    }
                }
                (Some(head), raw.values.iter().map(|v| span(v)).collect())
            }
            Err(_) => (None, Vec::new()),
        };
        Split {
            whole: head.is_none() || values.is_empty(),
            head: head.unwrap_or_default(),
            bytes,
            values,
            next: 0,
        }
    }

    /// The next piece: the series with its next `size` values.
    fn take(&mut self, size: usize) -> Vec<u8> {
        if self.whole {
            self.next = self.values.len();
            self.whole = false;
            return std::mem::take(&mut self.bytes);
        }
        let end = (self.next + size).min(self.values.len());
        let mut out = b"{".to_vec();
        out.extend_from_slice(&self.head);
        if !self.head.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"values\":[");
        for (i, r) in self.values[self.next..end].iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&self.bytes[r.clone()]);
        }
        out.push(b']');
        self.next = end;
        if self.more() {
            out.extend_from_slice(b",\"partial\":true");
        }
        out.push(b'}');
        out
    }

    fn more(&self) -> bool {
        self.next < self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn series(name: &str, rows: &[i64]) -> Vec<u8> {
        let values: Vec<Value> = rows.iter().map(|r| json!([r, r * 10])).collect();
        serde_json::to_vec(&json!({"name": name, "columns": ["time", "v"], "values": values}))
            .unwrap()
    }

    fn lines(results: Vec<Outcome>, chunking: &[Chunking], size: usize) -> Vec<Value> {
        Chunks::new(results, chunking, size)
            .map(|l| {
                assert_eq!(l.last(), Some(&b'\n'), "each piece ends its line");
                assert_eq!(l.iter().filter(|b| **b == b'\n').count(), 1);
                serde_json::from_slice(&l).unwrap()
            })
            .collect()
    }

    #[test]
    fn rows_are_cut_with_partial_flags_as_influxdb_does() {
        let r = Outcome::Series {
            id: 0,
            series: vec![series("cpu", &[1, 2, 3]), series("mem", &[4])],
            messages: None,
        };
        let got = lines(vec![r], &[Chunking::Rows], 2);
        assert_eq!(
            got,
            vec![
                json!({"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","v"],"values":[[1,10],[2,20]],"partial":true}],"partial":true}]}),
                json!({"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","v"],"values":[[3,30]]}],"partial":true}]}),
                json!({"results":[{"statement_id":0,"series":[{"name":"mem","columns":["time","v"],"values":[[4,40]]}]}]}),
            ]
        );
    }

    #[test]
    fn a_series_of_exactly_the_chunk_size_is_one_piece() {
        let r = Outcome::Series {
            id: 3,
            series: vec![series("cpu", &[1, 2])],
            messages: None,
        };
        let got = lines(vec![r], &[Chunking::Rows], 2);
        assert_eq!(got.len(), 1);
        assert!(got[0]["results"][0].get("partial").is_none());
        assert!(got[0]["results"][0]["series"][0].get("partial").is_none());
    }

    #[test]
    fn keys_keep_influxdb_order_and_text() {
        let raw = br#"{"name":"cpu","tags":{"host":"a"},"columns":["time","v"],"values":[[1,1.50],[2,null]]}"#;
        let r = Outcome::Series {
            id: 0,
            series: vec![raw.to_vec()],
            messages: None,
        };
        let got: Vec<Vec<u8>> = Chunks::new(vec![r], &[Chunking::Rows], 1).collect();
        assert_eq!(
            String::from_utf8_lossy(&got[0]),
            "{\"results\":[{\"statement_id\":0,\"series\":[{\"name\":\"cpu\",\"tags\":{\"host\":\"a\"},\"columns\":[\"time\",\"v\"],\"values\":[[1,1.50]],\"partial\":true}],\"partial\":true}]}\n"
        );
    }

    #[test]
    fn tag_listings_come_a_series_each_without_flags() {
        let v = json!({"statement_id": 1, "series": [
            {"name": "cpu", "columns": ["tagKey"], "values": [["a"], ["b"], ["c"]]},
            {"name": "mem", "columns": ["tagKey"], "values": [["d"]]},
        ]});
        let got = lines(vec![Outcome::Value(v)], &[Chunking::PerSeries], 1);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0]["results"][0]["series"][0]["values"],
            json!([["a"], ["b"], ["c"]])
        );
        assert!(got.iter().all(|g| g["results"][0].get("partial").is_none()));
        assert_eq!(got[1]["results"][0]["statement_id"], 1);
    }

    #[test]
    fn whole_answers_errors_and_empty_results_are_one_piece_each() {
        let listing = json!({"statement_id": 0, "series": [
            {"name": "measurements", "columns": ["name"], "values": [["a"], ["b"], ["c"]]}]});
        let results = vec![
            Outcome::Value(listing.clone()),
            Outcome::Value(json!({"statement_id": 1, "error": "database not found: x"})),
            Outcome::Series {
                id: 2,
                series: vec![],
                messages: None,
            },
        ];
        let chunking = [Chunking::Whole, Chunking::Rows, Chunking::Rows];
        let got = lines(results, &chunking, 1);
        assert_eq!(
            got,
            vec![
                json!({"results": [listing]}),
                json!({"results":[{"statement_id":1,"error":"database not found: x"}]}),
                json!({"results":[{"statement_id":2}]}),
            ]
        );
    }

    #[test]
    fn messages_come_once_with_the_first_piece() {
        let warning = json!([{"level": "warning", "text": "partial answer"}]);
        let r = Outcome::Series {
            id: 0,
            series: vec![series("cpu", &[1, 2, 3])],
            messages: Some(warning.clone()),
        };
        let got = lines(vec![r], &[Chunking::Rows], 1);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0]["results"][0]["messages"], warning);
        assert!(got[1..]
            .iter()
            .all(|g| g["results"][0].get("messages").is_none()));
    }

    #[test]
    fn chunk_size_takes_positive_integers_only() {
        assert_eq!(chunk_size(None), DEFAULT_CHUNK_SIZE);
        assert_eq!(chunk_size(Some("2")), 2);
        for bad in ["0", "-1", "abc", "1.5", ""] {
            assert_eq!(chunk_size(Some(bad)), DEFAULT_CHUNK_SIZE, "{bad}");
        }
    }
}
