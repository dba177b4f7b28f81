//! Plain HTTP/1.0 requests to a tenant's pods (their `/metrics` and `/decommission`): small
//! answers, on the pod network, so the operator needs no HTTP client beyond this.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `method path` to `addr` (`ip:port`), with `Authorization: Bearer <token>` when given;
/// returns the status code and the body (at most 16 MiB), within `timeout`.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<(u16, String), String> {
    tokio::time::timeout(timeout, exchange(addr, method, path, token))
        .await
        .map_err(|_| format!("{addr}: no answer within {timeout:?}"))?
}

async fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String), String> {
    let err = |e: std::io::Error| format!("{addr}: {e}");
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(err)?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head =
        format!("{method} {path} HTTP/1.0\r\nHost: sluice\r\n{auth}Content-Length: 0\r\n\r\n");
    s.write_all(head.as_bytes()).await.map_err(err)?;
    let mut buf = Vec::new();
    s.take(16 << 20).read_to_end(&mut buf).await.map_err(err)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    Ok((status, body.to_string()))
}
