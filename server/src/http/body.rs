//! Reading a request body within its bounds: size, time, memory, and what gzip inflates to.

use std::io::Read;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt;

use axum::http::StatusCode;
use axum::response::Response;

use super::admission::Reservation;
use super::{error, retry_later};

pub(super) enum BodyError {
    TooLarge,
    Read(String),
    /// The client did not send the whole body within `limits.body_read_timeout`.
    Timeout,
    /// The body does not fit in what remains of `limits.request_memory_bytes`.
    Busy,
}

/// The answer for a body that could not be read within its bounds.
pub(super) fn refusal(e: BodyError, limit: u64, timeout: std::time::Duration) -> Response {
    match e {
        BodyError::TooLarge => error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Request Entity Too Large: body exceeds the limit of {}",
                sluice_core::config::ByteSize(limit)
            ),
        ),
        BodyError::Read(e) => error(StatusCode::BAD_REQUEST, format!("reading body: {e}")),
        BodyError::Timeout => error(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "body not received within limits.body_read_timeout ({})",
                sluice_core::config::format_duration(timeout)
            ),
        ),
        BodyError::Busy => retry_later(
            "request memory budget (limits.request_memory_bytes) is in use by other requests; retry",
        ),
    }
}

/// Most of a refused body read and thrown away before answering, so that a client still sending
/// it gets the 413 instead of a broken pipe; beyond this the connection is simply closed.
const DRAIN_LIMIT: u64 = 16 << 20;

/// Reads the body within `timeout`, refusing more than `limit` bytes as soon as it is exceeded
/// and taking its memory from `memory` as it arrives.
pub(super) async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    timeout: std::time::Duration,
    memory: &mut Reservation,
) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(timeout, read_within(body, headers, limit, memory)).await {
        Ok(r) => r,
        Err(_) => Err(BodyError::Timeout),
    }
}

async fn read_within(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    memory: &mut Reservation,
) -> Result<Bytes, BodyError> {
    let mut body = body;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared {
        if len > limit {
            if len <= DRAIN_LIMIT {
                drain(&mut body, DRAIN_LIMIT).await;
            }
            return Err(BodyError::TooLarge);
        }
    }
    // One allocation of the declared size (at most `limit`) instead of a dozen doublings, each
    // copying what came before: bodies are megabytes.
    if !memory.grow_to(declared.unwrap_or(0)) {
        return Err(BodyError::Busy);
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if (buf.len() + data.len()) as u64 > limit {
                drain(&mut body, DRAIN_LIMIT).await;
                return Err(BodyError::TooLarge);
            }
            if !memory.grow_to((buf.len() + data.len()) as u64) {
                return Err(BodyError::Busy);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}

/// Reads and discards at most `cap` more bytes of `body`.
async fn drain(body: &mut Body, cap: u64) {
    let mut seen = 0u64;
    while seen <= cap {
        match body.frame().await {
            Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len() as u64),
            _ => break,
        }
    }
}

#[derive(Debug)]
pub(super) enum DecodeError {
    TooLarge(u64),
    Gzip(String),
    /// The inflated body and its parse do not fit in the request memory budget.
    Busy,
}

/// Undoes `Content-Encoding: gzip`, reading at most `limit` bytes of output, a chunk at a
/// time: before each chunk `room` is asked whether the output may grow to that size (the
/// request's memory), so a small body that inflates enormously costs bounded memory.
pub(super) fn decompress(
    gzip: bool,
    body: Bytes,
    limit: u64,
    room: &mut dyn FnMut(u64) -> bool,
) -> Result<Bytes, DecodeError> {
    const CHUNK: usize = 1 << 20;
    if !gzip {
        return Ok(body);
    }
    let mut dec = flate2::read::MultiGzDecoder::new(&body[..]).take(limit + 1);
    let mut out: Vec<u8> = Vec::new();
    loop {
        // The vector may hold up to twice what it has read (it grows by doubling).
        if !room(2 * (out.len() + CHUNK) as u64) {
            return Err(DecodeError::Busy);
        }
        let start = out.len();
        out.resize(start + CHUNK, 0);
        let n = dec
            .read(&mut out[start..])
            .map_err(|e| DecodeError::Gzip(e.to_string()))?;
        out.truncate(start + n);
        if n == 0 {
            break;
        }
        if out.len() as u64 > limit {
            return Err(DecodeError::TooLarge(limit));
        }
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_bounded() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&vec![b'a'; 100_000]).unwrap();
        let gz = Bytes::from(enc.finish().unwrap());
        assert_eq!(
            decompress(true, gz.clone(), 100_000, &mut |_| true)
                .unwrap()
                .len(),
            100_000
        );
        assert!(matches!(
            decompress(true, gz.clone(), 99_999, &mut |_| true),
            Err(DecodeError::TooLarge(_))
        ));
        assert!(matches!(
            decompress(true, Bytes::from_static(b"not gzip"), 10, &mut |_| true),
            Err(DecodeError::Gzip(_))
        ));
        // Refused as soon as the memory it would take is not there.
        assert!(matches!(
            decompress(true, gz, 100_000, &mut |bytes| bytes < 1 << 20),
            Err(DecodeError::Busy)
        ));
    }
}
