//! Just enough HTTP/1.1 for a write load: the request head is built once (method, path and
//! query, Host, Content-Type, Content-Length, auth), and a response is read only as far as its
//! status line and framing headers (`Content-Length`, chunked, `Connection: close`). A full
//! client stack would cost more CPU per request than the socket write itself and would hide
//! connection reuse; this keeps the generator from ever being the bottleneck.

use crate::error::{invalid, Result};
use crate::payload::{Format, Precision};

/// Where to send: `host:port` to connect to and a path prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port` (also the `Host` header).
    pub authority: String,
    /// Path prefix without the trailing slash (usually empty).
    pub prefix: String,
}

/// Parses `http://host[:port][/prefix]`. Only plain HTTP: TLS would put the client's crypto in
/// the measurement.
pub fn parse_url(url: &str) -> Result<Target> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| invalid("url", url, "only http:// is supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(invalid("url", url, "no host"));
    }
    if authority.contains('@') {
        return Err(invalid(
            "url",
            url,
            "credentials in the URL: use --user/--password or --token",
        ));
    }
    let port_ok = |p: &str| p.parse::<u16>().is_ok_and(|p| p > 0);
    let authority = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((_, "")) => format!("{authority}:80"),
            Some((_, p)) if p.strip_prefix(':').is_some_and(port_ok) => authority.to_string(),
            _ => return Err(invalid("url", url, "bad host or port")),
        }
    } else {
        match authority.rsplit_once(':') {
            None => format!("{authority}:80"),
            Some((h, p)) if !h.is_empty() && port_ok(p) => authority.to_string(),
            _ => return Err(invalid("url", url, "bad host or port")),
        }
    };
    if path.contains('?') {
        return Err(invalid("url", url, "no query string: use --db, --rp, ..."));
    }
    Ok(Target {
        authority,
        prefix: path.trim_end_matches('/').to_string(),
    })
}

/// Which write API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST /write?db=&rp=&precision=` (InfluxDB 1.x).
    V1,
    /// `POST /api/v2/write?bucket=db[/rp]&org=&precision=` (InfluxDB 2.x).
    V2,
}

/// Everything that goes into the request head.
#[derive(Clone, Debug)]
pub struct WriteParams {
    /// API flavour.
    pub api: Api,
    /// Database (v1) or bucket (v2).
    pub db: String,
    /// Retention policy; empty = the default one.
    pub rp: String,
    /// v2 organisation (ignored by sluice, required by InfluxDB 2).
    pub org: String,
    /// Timestamp precision.
    pub precision: Precision,
    /// `Authorization: Token <t>`.
    pub token: Option<String>,
    /// v1 `u`/`p` query parameters.
    pub user: Option<(String, String)>,
}

fn encode_component(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

impl WriteParams {
    /// The request target (path and query).
    pub fn path_and_query(&self, target: &Target) -> String {
        let mut q: Vec<(&str, String)> = Vec::new();
        let path = match self.api {
            Api::V1 => {
                q.push(("db", self.db.clone()));
                if !self.rp.is_empty() {
                    q.push(("rp", self.rp.clone()));
                }
                "/write"
            }
            Api::V2 => {
                let bucket = if self.rp.is_empty() {
                    self.db.clone()
                } else {
                    format!("{}/{}", self.db, self.rp)
                };
                q.push(("bucket", bucket));
                q.push(("org", self.org.clone()));
                "/api/v2/write"
            }
        };
        q.push(("precision", self.precision.as_str().to_string()));
        if let Some((u, p)) = &self.user {
            q.push(("u", u.clone()));
            q.push(("p", p.clone()));
        }
        let mut out = format!("{}{path}?", target.prefix);
        for (i, (k, v)) in q.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            out.push_str(k);
            out.push('=');
            encode_component(v, &mut out);
        }
        out
    }

    /// The complete request head for a body of `len` bytes.
    pub fn head(&self, target: &Target, format: Format, gzip: bool, len: usize) -> Vec<u8> {
        let mut h = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: sluice-load/{}\r\nContent-Type: {}\r\nContent-Length: {len}\r\n",
            self.path_and_query(target),
            target.authority,
            env!("CARGO_PKG_VERSION"),
            format.content_type(),
        );
        if gzip {
            h.push_str("Content-Encoding: gzip\r\n");
        }
        if let Some(t) = &self.token {
            h.push_str(&format!("Authorization: Token {t}\r\n"));
        }
        h.push_str("\r\n");
        h.into_bytes()
    }
}

/// How the response body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Exactly this many bytes.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// The parts of a response head the generator acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Body framing.
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// Malformed response head.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed response: {0}")]
pub struct BadResponse(pub &'static str);

/// Parses a response head from the start of `buf`. `Ok(None)`: incomplete, read more;
/// `Ok(Some((head, n)))`: the head is `buf[..n]`.
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, BadResponse> {
    let end = match find(buf, b"\r\n\r\n") {
        Some(i) => i + 4,
        None if buf.len() > 64 * 1024 => return Err(BadResponse("head over 64 KiB")),
        None => return Ok(None),
    };
    let text = std::str::from_utf8(&buf[..end]).map_err(|_| BadResponse("head not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or(BadResponse("no status line"))?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(BadResponse("not HTTP/1.x"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or(BadResponse("bad status code"))?;
    let mut close = version == "HTTP/1.0";
    let mut length = None;
    let mut chunked = false;
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(BadResponse("bad header line"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| BadResponse("bad Content-Length"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                close = true;
            } else if v.contains("keep-alive") {
                close = false;
            }
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::UntilClose
    };
    Ok(Some((
        Head {
            status,
            framing,
            close,
        },
        end,
    )))
}

/// Progress through a chunked body held in `buf` from `pos`: `Ok(Some(n))` when the whole body
/// (through the final CRLF after the last chunk and any trailers) ends at `n`, `Ok(None)` when
/// more bytes are needed.
pub fn chunked_end(buf: &[u8], mut pos: usize) -> Result<Option<usize>, BadResponse> {
    loop {
        let Some(eol) = find(&buf[pos..], b"\r\n") else {
            return Ok(None);
        };
        let size_text =
            std::str::from_utf8(&buf[pos..pos + eol]).map_err(|_| BadResponse("bad chunk size"))?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_text, 16).map_err(|_| BadResponse("bad chunk size"))?;
        pos += eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(eol) = find(&buf[pos..], b"\r\n") else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some(pos));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        pos += size + 2;
    }
}

/// The payload of a complete chunked body (best effort: stops at the first malformed chunk),
/// for showing an error message.
pub fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find(body, b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|t| usize::from_str_radix(t.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|&n| n > 0 && body.len() >= eol + 2 + n) else {
            break;
        };
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = body.get(eol + 4 + size..).unwrap_or(&[]);
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = parse_url("http://127.0.0.1:8086").ok();
        assert_eq!(
            t,
            Some(Target {
                authority: "127.0.0.1:8086".into(),
                prefix: String::new()
            })
        );
        let t = parse_url("http://db.example/influx/").ok();
        assert_eq!(
            t.map(|t| (t.authority, t.prefix)),
            Some(("db.example:80".into(), "/influx".into()))
        );
        assert!(parse_url("https://x").is_err());
        assert!(parse_url("http://").is_err());
        assert!(parse_url("http://a:b@x:1").is_err());
        assert!(parse_url("http://x:99999").is_err());
        assert!(parse_url("http://x:1/write?db=a").is_err());
    }

    fn params(api: Api) -> WriteParams {
        WriteParams {
            api,
            db: "tele graf".into(),
            rp: "raw".into(),
            org: "o".into(),
            precision: Precision::Ms,
            token: Some("s3cr3t".into()),
            user: Some(("me".into(), "p&w".into())),
        }
    }

    #[test]
    fn heads() {
        let t = parse_url("http://h:1").unwrap_or_else(|e| panic!("{e}"));
        let h = String::from_utf8(params(Api::V1).head(&t, Format::LineProtocol, true, 42))
            .unwrap_or_default();
        assert!(h.starts_with(
            "POST /write?db=tele%20graf&rp=raw&precision=ms&u=me&p=p%26w HTTP/1.1\r\nHost: h:1\r\n"
        ), "{h}");
        assert!(h.contains("Content-Length: 42\r\n"));
        assert!(h.contains("Content-Encoding: gzip\r\n"));
        assert!(h.contains("Authorization: Token s3cr3t\r\n"));
        assert!(h.contains("Content-Type: text/plain; charset=utf-8\r\n"));
        assert!(h.ends_with("\r\n\r\n"));
        let mut p = params(Api::V2);
        p.user = None;
        let h = String::from_utf8(p.head(&t, Format::Msgpack, false, 1)).unwrap_or_default();
        assert!(
            h.starts_with(
                "POST /api/v2/write?bucket=tele%20graf%2Fraw&org=o&precision=ms HTTP/1.1"
            ),
            "{h}"
        );
        assert!(h.contains("Content-Type: application/msgpack\r\n"));
        assert!(!h.contains("gzip"));
    }

    #[test]
    fn response_heads() {
        let r = parse_head(b"HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\nrest");
        assert_eq!(
            r,
            Ok(Some((
                Head {
                    status: 204,
                    framing: Framing::Length(0),
                    close: false
                },
                35
            )))
        );
        let r = parse_head(b"HTTP/1.1 400 Bad\r\ncontent-length: 12\r\nConnection: close\r\n\r\n");
        assert!(matches!(
            r,
            Ok(Some((
                Head {
                    status: 400,
                    framing: Framing::Length(12),
                    close: true
                },
                _
            )))
        ));
        let r = parse_head(b"HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(
            r,
            Ok(Some((
                Head {
                    framing: Framing::Chunked,
                    ..
                },
                _
            )))
        ));
        let r = parse_head(b"HTTP/1.0 200 OK\r\n\r\n");
        assert!(matches!(
            r,
            Ok(Some((
                Head {
                    framing: Framing::UntilClose,
                    close: true,
                    ..
                },
                _
            )))
        ));
        assert_eq!(parse_head(b"HTTP/1.1 204 No"), Ok(None));
        assert!(parse_head(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 2x4 No\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").is_err());
    }

    #[test]
    fn chunked_bodies() {
        let body = b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\nNEXT";
        assert_eq!(chunked_end(body, 0), Ok(Some(body.len() - 4)));
        assert_eq!(chunked_end(&body[..10], 0), Ok(None));
        assert_eq!(chunked_end(b"0\r\nTrailer: 1\r\n\r\n", 0), Ok(Some(17)));
        assert!(chunked_end(b"zz\r\n", 0).is_err());
        assert_eq!(dechunk(&body[..body.len() - 4]), b"Wikipedia");
        assert_eq!(dechunk(b"5\r\nab"), b"");
    }
}
