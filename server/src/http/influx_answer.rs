//! How `/query` writes its answer, as InfluxDB 1.8 does: JSON (`pretty=true` indented),
//! `chunked=true` as one object per line, or CSV when `Accept` asks for it; a query that
//! does not parse is 400 in the same format.

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{accept, error};
use crate::query::{chunked, csv, json_text, Answer};

/// The format a `/query` request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Format {
    /// `pretty=true` (InfluxDB takes only `true`).
    pretty: bool,
    /// `chunked=true`: the rows per chunk.
    chunk_size: Option<usize>,
    /// The CSV type `Accept` negotiates as InfluxDB does ([`accept`]): the answer's type.
    csv: Option<&'static str>,
}

impl Format {
    pub fn of(params: &HashMap<String, String>, headers: &HeaderMap) -> Format {
        let flag = |name: &str| params.get(name).map(String::as_str) == Some("true");
        Format {
            pretty: flag("pretty"),
            chunk_size: flag("chunked")
                .then(|| chunked::chunk_size(params.get("chunk_size").map(String::as_str))),
            csv: match accept::negotiate(headers.get_all(header::ACCEPT)) {
                accept::Answered::Csv(kind) => Some(kind),
                // No msgpack here: JSON, named so (see `accept`).
                accept::Answered::Json | accept::Answered::MsgPack => None,
            },
        }
    }

    /// The `epoch` of a request that names none: CSV times are integers, nanoseconds.
    pub fn default_epoch(&self) -> Option<&'static str> {
        self.csv.map(|_| "ns")
    }

    /// `answer` in this format: 200 with per-statement errors, 400 for a query that does not
    /// parse.
    pub fn respond(self, answer: Answer) -> Response {
        match answer {
            Answer::Results {
                results,
                missing,
                chunking,
            } => {
                let mut resp = match (self.csv, self.chunk_size) {
                    // Chunked or not, InfluxDB's CSV is the same text.
                    (Some(kind), _) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, kind)],
                        csv::answer(&results),
                    )
                        .into_response(),
                    (None, Some(size)) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "application/json")],
                        Body::new(PiecesBody {
                            pieces: chunked::Chunks::new(results, &chunking, size),
                            pretty: self.pretty,
                        }),
                    )
                        .into_response(),
                    (None, None) => self.json(results),
                };
                partial_header(&mut resp, &missing);
                resp
            }
            Answer::ParseError(msg) => {
                let mut resp = error(StatusCode::BAD_REQUEST, msg.clone());
                if let Some(kind) = self.csv {
                    *resp.body_mut() = Body::from(csv::error(&msg));
                    resp.headers_mut()
                        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
                } else {
                    let compact = serde_json::json!({ "error": msg }).to_string();
                    let compact = json_text::go_escaped(compact.into_bytes());
                    *resp.body_mut() = Body::from(if self.pretty {
                        json_text::pretty(&compact)
                    } else {
                        ended(compact)
                    });
                }
                resp
            }
        }
    }

    /// The whole answer as one JSON object.
    fn json(self, results: Vec<crate::query::answer::Outcome>) -> Response {
        let json = crate::query::answer::results_json(&results);
        // A `SHOW` answer is still a tree of values, which takes a while to free when it is
        // large (a tree of 10,000 series took 5-7 ms), so answers are freed beside the
        // response.
        tokio::task::spawn_blocking(move || drop(results));
        match json {
            Ok(bytes) => (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                {
                    let bytes = json_text::go_escaped(bytes);
                    if self.pretty {
                        json_text::pretty(&bytes)
                    } else {
                        ended(bytes)
                    }
                },
            )
                .into_response(),
            Err(e) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("writing the answer: {e}"),
            ),
        }
    }
}

/// `json` with the newline InfluxDB ends an answer with (Go's `json.Encoder` writes one after
/// each value; `pretty` ends with one too).
fn ended(mut json: Vec<u8>) -> Vec<u8> {
    json.push(b'\n');
    json
}

/// `X-Sluice-Partial`: the pods left out of a `partial=true` answer.
fn partial_header(resp: &mut Response, missing: &[String]) {
    if !missing.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&missing.join(", ")) {
            resp.headers_mut().insert("X-Sluice-Partial", v);
        }
    }
}

/// A `chunked=true` answer's pieces as a body, each written when the client has taken the
/// one before (with `pretty=true` each indented, as InfluxDB indents each).
struct PiecesBody {
    pieces: chunked::Chunks,
    pretty: bool,
}

impl http_body::Body for PiecesBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        let pretty = self.pretty;
        std::task::Poll::Ready(self.pieces.next().map(|piece| {
            let piece = json_text::go_escaped(piece);
            let piece = if pretty {
                json_text::pretty(&piece)
            } else {
                piece
            };
            Ok(http_body::Frame::data(Bytes::from(piece)))
        }))
    }
}
