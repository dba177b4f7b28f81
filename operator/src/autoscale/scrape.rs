//! What the autoscaler reads from a pod's `/metrics`, and one pod's window between two
//! scrapes: offered and acknowledged points per second, p95 write latency from the
//! histogram's bucket deltas (the bound of the bucket the 95th percentile falls in: never
//! optimistic), write requests refused with 503, and how fast the WAL backlog grew.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use sluice_core::metric_names as names;

use super::estimate::{Exclusion, Window};

/// Reads one pod's `/metrics`.
pub trait Scrape: Send + Sync {
    fn scrape<'a>(
        &'a self,
        pod: &'a Pod,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;
}

/// `GET http://<pod IP>:8086/metrics`, bounded by a timeout.
pub struct HttpScrape {
    pub timeout: Duration,
}

impl Scrape for HttpScrape {
    fn scrape<'a>(
        &'a self,
        pod: &'a Pod,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(async move {
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .ok_or("no pod IP")?;
            let addr = format!("{ip}:{}", crate::validate::HTTP_PORT);
            match crate::pod_http::request(&addr, "GET", "/metrics", None, self.timeout).await? {
                (200, body) => Ok(body),
                (code, _) => Err(format!("{addr}: /metrics answered {code}")),
            }
        })
    }
}

/// The figures of one scrape. Counters are as exported (totals since the process started).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSample {
    pub offered: f64,
    pub acked: f64,
    /// Points rejected for what they are (invalid lines, over the series limit), all reasons:
    /// answered, and no sign of the pod's capacity.
    pub rejected: f64,
    /// Write latency histogram, summed over the write endpoints: `(le seconds, cumulative
    /// count)` in bound order, `+Inf` last.
    pub write_buckets: Vec<(f64, f64)>,
    /// Write requests answered 503.
    pub refused: f64,
    pub backlog_bytes: f64,
    /// What the writes looked like (absent from servers older than these metrics).
    pub payload: Payload,
}

/// The shape of a pod's writes since it started: totals, as exported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    /// Per body format and encoding (`lp`/`msgpack`, gzipped or not): requests and the points
    /// they carried.
    pub kinds: Vec<PayloadKind>,
    /// Field values of those points.
    pub field_values: f64,
    /// Distinct series the pod knows.
    pub series: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PayloadKind {
    pub format: String,
    pub gzip: bool,
    pub requests: f64,
    pub points: f64,
}

impl Payload {
    fn kind(&mut self, labels: &[(String, String)]) -> &mut PayloadKind {
        let format = label(labels, "format").unwrap_or("lp").to_string();
        let gzip = label(labels, "encoding") == Some("gzip");
        let i = match self
            .kinds
            .iter()
            .position(|k| k.format == format && k.gzip == gzip)
        {
            Some(i) => i,
            None => {
                self.kinds.push(PayloadKind {
                    format,
                    gzip,
                    requests: 0.0,
                    points: 0.0,
                });
                self.kinds.len() - 1
            }
        };
        &mut self.kinds[i]
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("{0} is missing: not a sluice-server's /metrics")]
    Missing(String),
}

/// A sample's labels, `(name, value)` in the order written.
type Labels = Vec<(String, String)>;

/// One sample line: its metric name, labels and value.
fn sample(line: &str) -> Option<(&str, Labels, &str)> {
    let (head, value) = line.rsplit_once(' ')?;
    let Some(open) = head.find('{') else {
        return Some((head, Vec::new(), value));
    };
    let name = &head[..open];
    let body = head[open + 1..].strip_suffix('}')?;
    let mut labels = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.push((key.trim_start_matches(',').to_string(), value));
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some((name, labels, value))
}

fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn number(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => v.parse().ok(),
    }
}

/// Reads the figures the autoscaler needs from a Prometheus text exposition.
pub fn parse(text: &str) -> Result<PodSample, ScrapeError> {
    let offered = names::full(names::POINTS_OFFERED);
    let acked = names::full(names::POINTS_ACKNOWLEDGED);
    let bucket = format!("{}_bucket", names::full(names::REQUEST_DURATION));
    let requests = names::full(names::REQUESTS);
    let backlog = names::full(names::WAL_BACKLOG_BYTES);
    let rejected = names::full(names::POINTS_REJECTED);
    let payload_count = format!("{}_count", names::full(names::WRITE_REQUEST_POINTS));
    let payload_sum = format!("{}_sum", names::full(names::WRITE_REQUEST_POINTS));
    let field_values = names::full(names::WRITE_FIELD_VALUES);
    let series = names::full(names::SERIES);
    let (mut s, mut seen) = (PodSample::default(), [false; 3]);
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let syntax = |what: &str| ScrapeError::Syntax {
            line: i + 1,
            what: what.into(),
        };
        let (name, labels, value) = sample(line).ok_or_else(|| syntax("not a sample"))?;
        let is_write =
            || label(&labels, "endpoint").is_some_and(|e| names::WRITE_ENDPOINTS.contains(&e));
        let v = || number(value).ok_or_else(|| syntax("not a number"));
        if name == offered {
            s.offered = v()?;
            seen[0] = true;
        } else if name == acked {
            s.acked = v()?;
            seen[1] = true;
        } else if name == backlog {
            s.backlog_bytes = v()?;
            seen[2] = true;
        } else if name == rejected {
            s.rejected += v()?;
        } else if name == bucket && is_write() {
            let le = label(&labels, "le")
                .and_then(number)
                .ok_or_else(|| syntax("a bucket without le"))?;
            let n = v()?;
            match s.write_buckets.iter_mut().find(|(b, _)| *b == le) {
                Some((_, c)) => *c += n,
                None => s.write_buckets.push((le, n)),
            }
        } else if name == requests && is_write() && label(&labels, "code") == Some("503") {
            s.refused += v()?;
        } else if name == payload_count {
            s.payload.kind(&labels).requests += v()?;
        } else if name == payload_sum {
            s.payload.kind(&labels).points += v()?;
        } else if name == field_values {
            s.payload.field_values = v()?;
        } else if name == series {
            s.payload.series = v()?;
        }
    }
    for (ok, name) in seen.iter().zip([&offered, &acked, &backlog]) {
        if !ok {
            return Err(ScrapeError::Missing(name.clone()));
        }
    }
    s.write_buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(s)
}

/// The window between two scrapes of one pod, `prev_s` and `next_s` seconds apart on a
/// steady clock. A counter that went backwards means the process restarted in between.
pub fn window(
    pod: &str,
    prev: &PodSample,
    prev_s: f64,
    next: &PodSample,
    next_s: f64,
    excluded: Option<Exclusion>,
) -> Window {
    let dt = (next_s - prev_s).max(1e-3);
    let restarted = next.offered < prev.offered
        || next.acked < prev.acked
        || next.rejected < prev.rejected
        || next.refused < prev.refused
        || next
            .write_buckets
            .iter()
            .zip(&prev.write_buckets)
            .any(|(n, p)| n.1 < p.1);
    Window {
        pod: pod.to_string(),
        end_s: next_s,
        offered_pps: (next.offered - prev.offered).max(0.0) / dt,
        acked_pps: (next.acked + next.rejected - prev.acked - prev.rejected).max(0.0) / dt,
        p95_ms: p95_ms(prev, next),
        refused: (next.refused - prev.refused).max(0.0) as u64,
        backlog_slope: (next.backlog_bytes - prev.backlog_bytes) / dt,
        excluded: excluded.or(restarted.then_some(Exclusion::Restarted)),
    }
}

/// The upper bound of the bucket holding the 95th percentile of the requests between the two
/// scrapes, ms; `None` without requests (or when it is past the last finite bound).
fn p95_ms(prev: &PodSample, next: &PodSample) -> Option<f64> {
    let delta: Vec<(f64, f64)> = next
        .write_buckets
        .iter()
        .map(|(le, n)| {
            let before = prev
                .write_buckets
                .iter()
                .find(|(b, _)| b == le)
                .map_or(0.0, |(_, c)| *c);
            (*le, n - before)
        })
        .collect();
    let total = delta.last().map(|(_, n)| *n)?;
    if total <= 0.0 {
        return None;
    }
    let le = delta.iter().find(|(_, n)| *n >= 0.95 * total)?.0;
    le.is_finite().then_some(le * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two scrapes of a real sluice-server (debug build) 20 and 60 writes of 5,000 points in.
    const FIRST: &str = include_str!("../../testdata/server-metrics-1.txt");
    const SECOND: &str = include_str!("../../testdata/server-metrics-2.txt");

    #[test]
    fn a_real_servers_metrics_give_the_figures() {
        let a = parse(FIRST).unwrap();
        assert_eq!((a.offered, a.acked, a.refused), (100_000.0, 100_000.0, 0.0));
        assert_eq!(a.write_buckets.last(), Some(&(f64::INFINITY, 20.0)));
        let b = parse(SECOND).unwrap();
        assert_eq!(b.acked, 300_000.0);
        let w = window("p-0", &a, 100.0, &b, 110.0, None);
        assert_eq!(w.offered_pps, 20_000.0);
        assert_eq!(w.acked_pps, 20_000.0);
        // 35 of the 40 new requests took at most 12.8 ms, all at most 25.6 ms.
        assert_eq!(w.p95_ms, Some(25.6));
        assert_eq!(w.excluded, None);
    }

    #[test]
    fn a_restart_between_scrapes_excludes_the_window() {
        let a = parse(FIRST).unwrap();
        let b = parse(SECOND).unwrap();
        let w = window("p-0", &b, 0.0, &a, 10.0, None);
        assert_eq!(w.excluded, Some(Exclusion::Restarted));
        assert_eq!(w.offered_pps, 0.0);
        let w = window("p-0", &a, 0.0, &b, 10.0, Some(Exclusion::Draining));
        assert_eq!(w.excluded, Some(Exclusion::Draining));
    }

    #[test]
    fn the_payloads_shape_is_read() {
        let text = "sluice_points_offered_total 10\nsluice_points_acknowledged_total 5\nsluice_wal_backlog_bytes 7\n\
                    sluice_write_request_points_sum{encoding=\"identity\",format=\"lp\"} 5000\n\
                    sluice_write_request_points_count{encoding=\"identity\",format=\"lp\"} 4\n\
                    sluice_write_request_points_bucket{encoding=\"gzip\",format=\"msgpack\",le=\"+Inf\"} 1\n\
                    sluice_write_request_points_count{encoding=\"gzip\",format=\"msgpack\"} 1\n\
                    sluice_write_request_points_sum{encoding=\"gzip\",format=\"msgpack\"} 100\n\
                    sluice_write_field_values_total 25500\nsluice_series 42\n";
        let p = parse(text).unwrap().payload;
        assert_eq!((p.field_values, p.series), (25_500.0, 42.0));
        assert_eq!(
            p.kinds,
            [
                PayloadKind {
                    format: "lp".into(),
                    gzip: false,
                    requests: 4.0,
                    points: 5000.0
                },
                PayloadKind {
                    format: "msgpack".into(),
                    gzip: true,
                    requests: 1.0,
                    points: 100.0
                }
            ]
        );
        // A server without these metrics: an empty shape, not an error.
        let a = parse(FIRST).unwrap();
        assert!(a.payload.kinds.is_empty(), "{:?}", a.payload);
    }

    #[test]
    fn rejected_points_are_answered_not_unacknowledged() {
        // A client whose lines are bad or over the series limit: the pod answered them all.
        let sample = |offered, acked, invalid, limited| {
            parse(&format!(
                "sluice_points_offered_total {offered}\nsluice_points_acknowledged_total {acked}\n\
                 sluice_wal_backlog_bytes 0\n\
                 sluice_points_rejected_total{{reason=\"invalid\"}} {invalid}\n\
                 sluice_points_rejected_total{{reason=\"series_limit\"}} {limited}\n"
            ))
            .unwrap()
        };
        let (a, b) = (sample(1000, 900, 60, 40), sample(11_000, 9_900, 660, 440));
        assert_eq!(b.rejected, 1_100.0);
        let w = window("p-0", &a, 0.0, &b, 10.0, None);
        assert_eq!((w.offered_pps, w.acked_pps), (1_000.0, 1_000.0));
        assert_eq!(w.excluded, None);
    }

    #[test]
    fn refusals_and_labels_with_escapes_are_read() {
        let text = "sluice_points_offered_total 10\nsluice_points_acknowledged_total 5\nsluice_wal_backlog_bytes 7\n\
                    sluice_http_requests_total{code=\"503\",endpoint=\"write\"} 3\n\
                    sluice_http_requests_total{code=\"503\",endpoint=\"write_v2\"} 2\n\
                    sluice_http_requests_total{code=\"503\",endpoint=\"sql\"} 9\n\
                    other{a=\"x\\\"y,z\",b=\"\"} 1\n";
        let s = parse(text).unwrap();
        assert_eq!((s.refused, s.backlog_bytes), (5.0, 7.0));
        assert_eq!(
            parse("sluice_points_offered_total 1\n"),
            Err(ScrapeError::Missing(
                "sluice_points_acknowledged_total".into()
            ))
        );
        assert!(matches!(
            parse("x{a=\"1\" 2\n"),
            Err(ScrapeError::Syntax { line: 1, .. })
        ));
    }
}
