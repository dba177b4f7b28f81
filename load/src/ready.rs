//! Waiting for the target to be ready before the load starts: a generator started beside a
//! server (the operator's calibration pod runs both at once) would otherwise measure the
//! server's start-up, or fail to connect at all.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::http::{parse_head, Target};

/// How often readiness is asked for.
const POLL: Duration = Duration::from_millis(500);

/// Polls `GET <prefix>/ready` until it answers 2xx, for at most `within`. The error names
/// the last answer (a status, or why there was none).
pub async fn wait_ready(target: &Target, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let last = match tokio::time::timeout(POLL.max(Duration::from_secs(2)), ask(target)).await {
            Ok(Ok(status)) if (200..300).contains(&status) => return Ok(()),
            Ok(Ok(status)) => format!("answered {status}"),
            Ok(Err(e)) => e,
            Err(_) => "no answer within 2s".into(),
        };
        if Instant::now() + POLL > deadline {
            return Err(Error::NotReady {
                addr: target.authority.clone(),
                within,
                last,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One `GET /ready`: its status code.
async fn ask(target: &Target) -> std::result::Result<u16, String> {
    let mut s = tokio::net::TcpStream::connect(&target.authority)
        .await
        .map_err(|e| e.to_string())?;
    let head = format!(
        "GET {}/ready HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        target.prefix, target.authority
    );
    s.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some((h, _)) = parse_head(&buf).map_err(|e| e.to_string())? {
            return Ok(h.status);
        }
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before answering".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers 503 `unready` times, then 200.
    async fn server(unready: usize) -> Target {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let authority = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let status = if n < unready {
                    "503 Service Unavailable"
                } else {
                    "200 OK"
                };
                n += 1;
                let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        Target {
            authority,
            prefix: String::new(),
        }
    }

    #[tokio::test]
    async fn waits_until_ready_or_says_why_not() {
        let t = server(2).await;
        assert!(wait_ready(&t, Duration::from_secs(10)).await.is_ok());
        let t = server(usize::MAX).await;
        let e = wait_ready(&t, Duration::from_millis(600)).await;
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("answered 503"), "{msg}");
        let nobody = Target {
            authority: "127.0.0.1:1".into(),
            prefix: String::new(),
        };
        assert!(wait_ready(&nobody, Duration::from_millis(100))
            .await
            .is_err());
    }
}
