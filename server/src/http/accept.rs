//! The answer's type from `Accept`, negotiated as InfluxDB 1.8 negotiates it: every media range
//! of every `Accept` header, by `q` (1 when absent, 0 when not a number; a range of `q=0` still
//! counts) and then in the order given, is matched against JSON, `application/csv`, `text/csv`
//! and msgpack in that order, wildcards included (`text/*` is `text/csv`, `*/*` JSON), and the
//! first match wins; a range that is not a media type is skipped. sluice writes no msgpack: a
//! request whose first match is msgpack is answered JSON, with JSON's content type, which
//! InfluxDB's clients read by that type.

use axum::http::header::{GetAll, HeaderValue};

/// A type `/query` can answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Json,
    /// `application/csv` or `text/csv`, as the match named it (the answer's content type).
    Csv(&'static str),
    MsgPack,
}

/// InfluxDB's types, in the order it tries them.
const TYPES: [(&str, &str, Answered); 4] = [
    ("application", "json", Answered::Json),
    ("application", "csv", Answered::Csv("application/csv")),
    ("text", "csv", Answered::Csv("text/csv")),
    ("application", "x-msgpack", Answered::MsgPack),
];

/// One media range of an `Accept` header.
#[derive(Debug, PartialEq)]
struct Range {
    kind: String,
    sub: String,
    q: f64,
}

/// The type `accept` (every `Accept` header of the request) asks for; JSON without one.
pub fn negotiate(accept: GetAll<'_, HeaderValue>) -> Answered {
    let mut ranges: Vec<Range> = accept
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(range)
        .collect();
    // Stable: ranges of equal `q` keep their order.
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q));
    ranges
        .iter()
        .find_map(|r| {
            TYPES.iter().find_map(|(kind, sub, answered)| {
                ((r.kind == "*" || r.kind == *kind) && (r.sub == "*" || r.sub == *sub))
                    .then_some(*answered)
            })
        })
        .unwrap_or(Answered::Json)
}

/// A media range as Go's `mime.ParseMediaType` reads it (the type lowercased, parameters
/// `name=token` or `name="quoted"`), with `*` alone as `*/*`; `None` for anything else.
fn range(text: &str) -> Option<Range> {
    let mut parts = text.split(';');
    let media = parts.next()?.trim().to_ascii_lowercase();
    let (kind, sub) = match media.split_once('/') {
        None if media == "*" => ("*".to_string(), "*".to_string()),
        Some((k, s)) if is_token(k) && is_token(s) => (k.to_string(), s.to_string()),
        _ => return None,
    };
    let mut q = 1.0;
    let mut names = Vec::new();
    for param in parts {
        let param = param.trim();
        if param.is_empty() {
            continue;
        }
        let (name, value) = param.split_once('=')?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        let value = match value.strip_prefix('"') {
            Some(quoted) => quoted.strip_suffix('"')?,
            None if is_token(value) => value,
            None => return None,
        };
        if !is_token(&name) || names.contains(&name) {
            return None;
        }
        if name == "q" {
            q = value.parse().unwrap_or(0.0);
        }
        names.push(name);
    }
    Some(Range { kind, sub, q })
}

/// An RFC 2045 token: printable ASCII but spaces and `()<>@,;:\"/[]?=`.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header::ACCEPT, HeaderMap};

    fn of(values: &[&str]) -> Answered {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(ACCEPT, HeaderValue::from_str(v).unwrap());
        }
        negotiate(headers.get_all(ACCEPT))
    }

    #[test]
    fn ranges_are_matched_by_q_then_order_as_influxdb_matches_them() {
        let csv = Answered::Csv("application/csv");
        let text = Answered::Csv("text/csv");
        for (accept, want) in [
            (&[][..], Answered::Json),
            (&["application/csv"], csv),
            (&["text/csv"], text),
            (&["Application/CSV; charset=utf-8"], csv),
            (&["text/*"], text),
            (&["*/*"], Answered::Json),
            (&["*"], Answered::Json),
            (&["*/csv"], csv),
            (
                &["text/html, application/xhtml+xml, */*;q=0.8"],
                Answered::Json,
            ),
            (&["application/json;q=0.5, text/csv"], text),
            (&["text/csv;q=0.5, application/json;q=0.5"], text),
            (&["text/csv;q=x, application/json;q=0.1"], Answered::Json),
            (&["text/csv;q=0"], text),
            (&["nonsense, text/csv"], text),
            (&["text/csv;q", "application/csv"], csv),
            (&["text/plain", "text/csv"], text),
            (&["application/x-msgpack"], Answered::MsgPack),
        ] {
            assert_eq!(of(accept), want, "{accept:?}");
        }
    }
}
