//! One keep-alive connection speaking pre-encoded HTTP/1.1 (see [`crate::http`]): the bytes
//! of each request (templates patched per request, or a pool of pre-compressed ones), one
//! exchange bounded by the request timeout, and a reconnect after an error, a timeout or
//! `Connection: close`.

use std::io::Write as _;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::engine::LoadConfig;
use crate::error::{Error, Result};
use crate::http::{chunked_end, dechunk, parse_head, Framing};
use crate::payload::Payloads;

/// The bytes of request `seq`.
pub(crate) enum Source {
    /// One head + body per template; timestamps patched per request in the connection's
    /// own copy.
    Patched {
        payloads: Payloads,
        heads: Vec<Vec<u8>>,
    },
    /// Complete pre-compressed requests, cycled.
    Pool { requests: Vec<Vec<u8>> },
}

/// A connection's private request buffer (which template it holds, and the bytes).
#[derive(Default)]
pub(crate) struct ConnBuf {
    template: Option<usize>,
    bytes: Vec<u8>,
}

impl Source {
    pub(crate) fn build(cfg: &LoadConfig) -> Result<Self> {
        let payloads = Payloads::build(&cfg.payload)?;
        let format = cfg.payload.format;
        match cfg.gzip_pool {
            None => {
                let heads = payloads
                    .templates()
                    .iter()
                    .map(|t| cfg.params.head(&cfg.target, format, false, t.body.len()))
                    .collect();
                Ok(Source::Patched { payloads, heads })
            }
            Some(n) => {
                let mut requests = Vec::with_capacity(n.max(1));
                for seq in 0..n.max(1) as u64 {
                    let body = payloads.body(seq)?;
                    let mut gz = flate2::write::GzEncoder::new(
                        Vec::with_capacity(body.len() / 4),
                        flate2::Compression::default(),
                    );
                    gz.write_all(&body)?;
                    let body = gz.finish()?;
                    let mut req = cfg.params.head(&cfg.target, format, true, body.len());
                    req.extend_from_slice(&body);
                    requests.push(req);
                }
                Ok(Source::Pool { requests })
            }
        }
    }

    fn request<'a>(&'a self, seq: u64, buf: &'a mut ConnBuf) -> Result<&'a [u8]> {
        match self {
            Source::Patched { payloads, heads } => {
                let (j, cycle) = payloads.locate(seq);
                let head = heads
                    .get(j)
                    .ok_or_else(|| Error::Payload(format!("no template {j}")))?;
                if buf.template != Some(j) {
                    let body = &payloads.templates()[j].body;
                    buf.bytes.clear();
                    buf.bytes.reserve(head.len() + body.len());
                    buf.bytes.extend_from_slice(head);
                    buf.bytes.extend_from_slice(body);
                    buf.template = Some(j);
                }
                payloads.patch(j, cycle, &mut buf.bytes, head.len())?;
                Ok(&buf.bytes)
            }
            Source::Pool { requests } => Ok(&requests[(seq % requests.len() as u64) as usize]),
        }
    }
}

/// State shared by every connection.
pub(crate) struct Shared {
    pub(crate) source: Source,
    pub(crate) authority: String,
    pub(crate) timeout: Duration,
}

/// How one request ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// A response; non-2xx carries the start of its body.
    Status(u16, Option<String>),
    /// No response: `connect`, `io`, `timeout`, `protocol` or `client`, with detail.
    Failed(&'static str, String),
}

impl Outcome {
    pub(crate) fn is_ok(&self) -> bool {
        matches!(self, Outcome::Status(s, _) if (200..300).contains(s))
    }
}

/// One keep-alive connection and its buffers.
pub(crate) struct Conn {
    stream: Option<TcpStream>,
    buf: ConnBuf,
    rbuf: Vec<u8>,
}

/// Opens a connection with Nagle off (a request is one write; waiting to coalesce would only
/// add latency), giving up after `timeout` so a black-holed target fails fast.
pub(crate) async fn connect(authority: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let s = tokio::time::timeout(timeout, TcpStream::connect(authority))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    s.set_nodelay(true)?;
    Ok(s)
}

fn io_failure(e: std::io::Error) -> Outcome {
    Outcome::Failed("io", e.to_string())
}

impl Conn {
    pub(crate) fn new(stream: Option<TcpStream>) -> Self {
        Self {
            stream,
            buf: ConnBuf::default(),
            rbuf: Vec::with_capacity(8192),
        }
    }

    /// Sends request `seq` and reads its response; any failure closes the connection so the
    /// next request reconnects.
    pub(crate) async fn exchange(&mut self, shared: &Shared, seq: u64) -> Outcome {
        match tokio::time::timeout(shared.timeout, self.exchange_inner(shared, seq)).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(failure)) => {
                self.stream = None;
                failure
            }
            Err(_) => {
                self.stream = None;
                Outcome::Failed(
                    "timeout",
                    format!("no response within {:?}", shared.timeout),
                )
            }
        }
    }

    async fn exchange_inner(&mut self, shared: &Shared, seq: u64) -> Result<Outcome, Outcome> {
        let Conn { stream, buf, rbuf } = self;
        if stream.is_none() {
            let s = connect(&shared.authority, shared.timeout)
                .await
                .map_err(|e| Outcome::Failed("connect", e.to_string()))?;
            *stream = Some(s);
        }
        let Some(s) = stream.as_mut() else {
            return Err(Outcome::Failed("connect", "no connection".into()));
        };
        let req = shared
            .source
            .request(seq, buf)
            .map_err(|e| Outcome::Failed("client", e.to_string()))?;
        s.write_all(req).await.map_err(io_failure)?;
        rbuf.clear();
        let mut chunk = [0u8; 8192];
        let (head, head_len) = loop {
            let parsed =
                parse_head(rbuf).map_err(|e| Outcome::Failed("protocol", e.to_string()))?;
            if let Some(h) = parsed {
                break h;
            }
            let n = s.read(&mut chunk).await.map_err(io_failure)?;
            if n == 0 {
                return Err(Outcome::Failed(
                    "io",
                    "connection closed before the response".into(),
                ));
            }
            rbuf.extend_from_slice(&chunk[..n]);
        };
        // Keep at most a little of the body: enough to show an error message.
        let mut body_end;
        loop {
            body_end = match head.framing {
                Framing::Length(n) => (rbuf.len() >= head_len + n).then_some(head_len + n),
                Framing::Chunked => chunked_end(rbuf, head_len)
                    .map_err(|e| Outcome::Failed("protocol", e.to_string()))?,
                Framing::UntilClose => None,
            };
            if body_end.is_some() {
                break;
            }
            let n = s.read(&mut chunk).await.map_err(io_failure)?;
            if n == 0 {
                if head.framing == Framing::UntilClose {
                    body_end = Some(rbuf.len());
                    break;
                }
                return Err(Outcome::Failed("io", "connection closed mid-body".into()));
            }
            rbuf.extend_from_slice(&chunk[..n]);
        }
        if head.close {
            *stream = None;
        }
        let sample = (!(200..300).contains(&head.status)).then(|| {
            let body = &rbuf[head_len..body_end.unwrap_or(rbuf.len())];
            let body = match head.framing {
                Framing::Chunked => dechunk(body),
                _ => body.to_vec(),
            };
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
            text.trim().to_string()
        });
        Ok(Outcome::Status(head.status, sample))
    }
}
