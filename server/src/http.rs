//! The HTTP API: InfluxDB 1.x/2.x writes, `/query` for client start-up, `/sql` for reads, and
//! the operational endpoints. Status codes and error bodies follow InfluxDB 1.8 for the same
//! request; the README lists where sluice deliberately differs.

// Handlers return early with a finished `Response` as the error; boxing it would only move the
// allocation, not avoid it.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use http_body_util::BodyExt;
use serde_json::json;
use sluice_core::config::RetentionPolicyConfig;
use sluice_core::precision::Precision;

use crate::app::App;
use crate::catalog::CatalogError;
use crate::influxql::{self, Statement};
use crate::ingest::{BodyFormat, WriteError};
use crate::sql_guard;
use crate::wal::WalError;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Failed lines named in one error message.
const MAX_LISTED_ERRORS: usize = 10;
/// What `/ping` reports as the InfluxDB version: the 1.x API sluice speaks.
const INFLUX_COMPAT_VERSION: &str = "1.8.10";

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/write", post(write_v1))
        .route("/api/v2/write", post(write_v2))
        .route("/query", get(query).post(query))
        .route("/sql", get(sql).post(sql))
        .route("/ping", get(ping).head(ping))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .with_state(app)
}

/// An error in InfluxDB's shape: JSON `{"error": ...}` plus the `X-Influxdb-Error` header.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    let mut resp = (status, axum::Json(json!({ "error": message }))).into_response();
    if let Ok(v) = HeaderValue::from_str(&message.replace(['\r', '\n'], " ")) {
        resp.headers_mut().insert("X-Influxdb-Error", v);
    }
    resp
}

fn retry_later(message: impl Into<String>) -> Response {
    let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, message);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

fn observe(app: &App, endpoint: &str, started: Instant, resp: &Response) {
    app.metrics
        .request_duration
        .with_label_values(&[endpoint])
        .observe(started.elapsed().as_secs_f64());
    app.metrics
        .requests
        .with_label_values(&[endpoint, resp.status().as_str()])
        .inc();
}

/// Credentials from `u`/`p`, `Authorization: Token`, `Bearer` or `Basic`.
fn credentials(params: &HashMap<String, String>, headers: &HeaderMap) -> Option<String> {
    if let Some(p) = params.get("p") {
        return Some(p.clone());
    }
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = auth.split_once(' ')?;
    match scheme.to_ascii_lowercase().as_str() {
        "token" | "bearer" => Some(rest.trim().to_string()),
        "basic" => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .ok()?;
            let s = String::from_utf8(decoded).ok()?;
            s.split_once(':').map(|(_, p)| p.to_string())
        }
        _ => None,
    }
}

fn authorize(
    app: &App,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<(), Response> {
    if app.tokens.is_empty() {
        return Ok(());
    }
    match credentials(params, headers) {
        None => Err(error(
            StatusCode::UNAUTHORIZED,
            "unable to parse authentication credentials",
        )),
        Some(t) if app.tokens.contains(&t) => Ok(()),
        Some(_) => Err(error(StatusCode::UNAUTHORIZED, "authorization failed")),
    }
}

enum BodyError {
    TooLarge,
    Read(String),
}

/// Most of a refused body read and thrown away before answering, so that a client still sending
/// it gets the 413 instead of a broken pipe; beyond this the connection is simply closed.
const DRAIN_LIMIT: u64 = 16 << 20;

/// Reads the body, refusing more than `limit` bytes as soon as it is exceeded.
async fn read_body(body: Body, headers: &HeaderMap, limit: u64) -> Result<Bytes, BodyError> {
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
    let mut buf = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if (buf.len() + data.len()) as u64 > limit {
                drain(&mut body, DRAIN_LIMIT).await;
                return Err(BodyError::TooLarge);
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
enum DecodeError {
    TooLarge(u64),
    Gzip(String),
}

/// Undoes `Content-Encoding: gzip`, reading at most `limit` bytes of output, so that a small
/// body that inflates enormously costs bounded memory.
fn decompress(gzip: bool, body: Bytes, limit: u64) -> Result<Bytes, DecodeError> {
    if !gzip {
        return Ok(body);
    }
    let mut out = Vec::with_capacity((body.len() * 4).min(limit as usize));
    let mut dec = flate2::read::MultiGzDecoder::new(&body[..]).take(limit + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| DecodeError::Gzip(e.to_string()))?;
    if out.len() as u64 > limit {
        return Err(DecodeError::TooLarge(limit));
    }
    Ok(Bytes::from(out))
}

struct WriteParams {
    db: String,
    rp: String,
    precision: String,
    v2: bool,
}

/// The precisions each API accepts, with InfluxDB's message for anything else. The v1 endpoint
/// takes the 1.x names and the long forms; v2 takes only what InfluxDB 2.x defines.
fn parse_precision(p: &str, v2: bool) -> Result<Precision, String> {
    if p.is_empty() {
        return Ok(Precision::Nanosecond);
    }
    let allowed = if v2 {
        matches!(p, "ns" | "us" | "ms" | "s")
    } else {
        matches!(p, "n" | "ns" | "u" | "us" | "µ" | "ms" | "s" | "m" | "h")
    };
    match Precision::parse(p) {
        Ok(pr) if allowed => Ok(pr),
        _ if v2 => Err(format!("invalid precision {p:?} (use ns, us, ms or s)")),
        _ => Err(format!("invalid precision {p:?} (use n, u, ms, s, m or h)")),
    }
}

async fn write_v1(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match authorize(&app, &params, &headers) {
        Err(r) => r,
        Ok(()) => {
            let p = WriteParams {
                db: params.get("db").cloned().unwrap_or_default(),
                rp: params.get("rp").cloned().unwrap_or_default(),
                precision: params.get("precision").cloned().unwrap_or_default(),
                v2: false,
            };
            if p.db.is_empty() {
                error(StatusCode::BAD_REQUEST, "database is required")
            } else {
                write(&app, p, &headers, body).await
            }
        }
    };
    observe(&app, "write", started, &resp);
    resp
}

async fn write_v2(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match authorize(&app, &params, &headers) {
        Err(r) => r,
        Ok(()) => {
            let bucket = params.get("bucket").cloned().unwrap_or_default();
            let (db, rp) = match bucket.split_once('/') {
                Some((d, r)) => (d.to_string(), r.to_string()),
                None => (bucket.clone(), String::new()),
            };
            if db.is_empty() {
                error(StatusCode::BAD_REQUEST, "bucket is required")
            } else {
                let p = WriteParams {
                    db,
                    rp,
                    precision: params.get("precision").cloned().unwrap_or_default(),
                    v2: true,
                };
                write(&app, p, &headers, body).await
            }
        }
    };
    observe(&app, "write_v2", started, &resp);
    resp
}

async fn write(app: &Arc<App>, p: WriteParams, headers: &HeaderMap, body: Body) -> Response {
    if !app.ready.load(Ordering::Acquire) {
        return retry_later("server is starting or shutting down; retry");
    }
    let precision = match parse_precision(&p.precision, p.v2) {
        Ok(pr) => pr,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let backlog = app.scheduler.backlog();
    if backlog.bytes > app.cfg.limits.max_wal_backlog_bytes.0 {
        app.metrics
            .backpressure
            .with_label_values(&["flush_backlog"])
            .inc();
        return retry_later(format!(
            "flush backlog is {} bytes, above the limit of {}; retry",
            backlog.bytes, app.cfg.limits.max_wal_backlog_bytes
        ));
    }
    let target = match app.ingest.catalog.resolve(&p.db, &p.rp, &app.ingest.wal) {
        Ok(t) => t,
        Err(
            e @ (CatalogError::DatabaseNotFound(_) | CatalogError::RetentionPolicyNotFound { .. }),
        ) => return error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ CatalogError::BadName { .. }) => {
            return error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let raw = match read_body(body, headers, app.cfg.limits.max_body_bytes.0).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "Request Entity Too Large: body exceeds the limit of {}",
                    app.cfg.limits.max_body_bytes
                ),
            )
        }
        Err(BodyError::Read(e)) => {
            return error(StatusCode::BAD_REQUEST, format!("reading body: {e}"))
        }
    };
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    let format = match headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        }) {
        Some(ct) if ct == "application/msgpack" || ct == "application/x-msgpack" => {
            BodyFormat::Msgpack
        }
        _ => BodyFormat::LineProtocol,
    };
    let limit = app.cfg.limits.max_decompressed_bytes.0;
    let app2 = app.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let body = decompress(gzip, raw, limit)?;
        Ok::<_, DecodeError>(app2.ingest.prepare(&target, precision, format, &body))
    })
    .await;
    let prepared = match prepared {
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("write task failed: {e}"),
            )
        }
        Ok(Err(DecodeError::TooLarge(limit))) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                "Request Entity Too Large: decompressed body exceeds the limit of {limit} bytes"
            ),
            )
        }
        Ok(Err(DecodeError::Gzip(e))) => {
            return error(StatusCode::BAD_REQUEST, format!("invalid gzip body: {e}"))
        }
        Ok(Ok(Err(e))) => return write_error(app, e),
        Ok(Ok(Ok(p))) => p,
    };
    let offered = (prepared.points + prepared.rejections.len() + prepared.over_limit) as u64;
    app.metrics.points_offered.inc_by(offered);
    let outcome = match app.ingest.commit(prepared).await {
        Ok(o) => o,
        Err(e) => return write_error(app, e),
    };
    app.metrics
        .points_acknowledged
        .inc_by(outcome.points as u64);
    if outcome.dropped > outcome.over_limit {
        app.metrics
            .points_rejected
            .with_label_values(&["invalid"])
            .inc_by((outcome.dropped - outcome.over_limit) as u64);
    }
    if outcome.over_limit > 0 {
        app.metrics
            .points_rejected
            .with_label_values(&["series_limit"])
            .inc_by(outcome.over_limit as u64);
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "partial write: max-series limit exceeded: ({}) dropped={}",
                app.cfg.limits.max_series, outcome.dropped
            ),
        );
    }
    if outcome.errors.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    // As InfluxDB: a rejected point (type conflict, bad field name) is reported alone, the first
    // one; otherwise every line that failed to parse is listed, one per line of the message. A
    // few are enough to act on, and a million bad lines must not make a message as large.
    let listed: Vec<&String> = match outcome
        .errors
        .iter()
        .find(|e| !e.starts_with("unable to parse"))
    {
        Some(first_rejected) => vec![first_rejected],
        None => outcome.errors.iter().collect(),
    };
    let mut reason = listed[..listed.len().min(MAX_LISTED_ERRORS)]
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if listed.len() > MAX_LISTED_ERRORS {
        reason.push_str(&format!(
            "\n... and {} more",
            listed.len() - MAX_LISTED_ERRORS
        ));
    }
    if outcome.points == 0 && outcome.parse_only {
        error(StatusCode::BAD_REQUEST, reason)
    } else {
        error(
            StatusCode::BAD_REQUEST,
            format!("partial write: {reason} dropped={}", outcome.dropped),
        )
    }
}

fn write_error(app: &App, e: WriteError) -> Response {
    match e {
        WriteError::Wal(WalError::QueueFull(n)) => {
            app.metrics
                .backpressure
                .with_label_values(&["wal_queue"])
                .inc();
            retry_later(format!(
                "write-ahead log queue is full ({n} requests waiting); retry"
            ))
        }
        WriteError::Wal(WalError::Closed) => retry_later("server is shutting down; retry"),
        WriteError::Catalog(e @ CatalogError::Engine(_)) => {
            app.metrics.chdb_errors.with_label_values(&["ddl"]).inc();
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
        e => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `q` from the query string or, for POST, from a form body.
async fn query_param(
    params: &HashMap<String, String>,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
    limit: u64,
) -> Result<Option<String>, Response> {
    if let Some(q) = params.get("q") {
        return Ok(Some(q.clone()));
    }
    if method != Method::POST {
        return Ok(None);
    }
    let raw = match read_body(body, headers, limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request Entity Too Large",
            ))
        }
        Err(BodyError::Read(e)) => return Err(error(StatusCode::BAD_REQUEST, e)),
    };
    // curl sends raw SQL as a form by default, so only a body that starts like `q=` is one.
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
        && (raw.starts_with(b"q=") || raw.windows(3).any(|w| w == b"&q="));
    if is_form {
        let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&raw)
            .map_err(|e| error(StatusCode::BAD_REQUEST, format!("invalid form body: {e}")))?;
        return Ok(form.into_iter().find(|(k, _)| k == "q").map(|(_, v)| v));
    }
    Ok(Some(String::from_utf8_lossy(&raw).into_owned()))
}

async fn query(
    State(app): State<Arc<App>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match authorize(&app, &params, &headers) {
        Err(r) => r,
        Ok(()) => match query_param(&params, &method, &headers, body, 1 << 20).await {
            Err(r) => r,
            Ok(None) => error(StatusCode::BAD_REQUEST, "missing required parameter \"q\""),
            Ok(Some(q)) => influx_query(&app, &q),
        },
    };
    observe(&app, "query", started, &resp);
    resp
}

fn influx_query(app: &App, q: &str) -> Response {
    let statements = match influxql::parse(q) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let catalog = &app.ingest.catalog;
    let mut results = Vec::new();
    for (id, s) in statements.into_iter().enumerate() {
        let r = match s {
            Statement::ShowDatabases => influxql::result_databases(id, &catalog.database_names()),
            Statement::ShowRetentionPolicies { db } => {
                let db = db.unwrap_or_default();
                match catalog.policies(&db) {
                    Some(p) => influxql::result_policies(id, &p),
                    None => influxql::result_error(id, &format!("database not found: {db}")),
                }
            }
            Statement::CreateDatabase {
                name,
                duration,
                policy,
            } => {
                let rp = (duration.is_some() || policy.is_some()).then(|| RetentionPolicyConfig {
                    name: policy.unwrap_or_else(|| "autogen".into()),
                    duration: duration.unwrap_or_default(),
                    default: true,
                });
                match catalog.create_database(&name, rp, &app.ingest.wal) {
                    Ok(_) => influxql::result_ok(id),
                    Err(e) => influxql::result_error(id, &e.to_string()),
                }
            }
            Statement::Unsupported(stmt) => influxql::result_error(
                id,
                &format!("statement not supported by sluice's /query (use /sql): {stmt}"),
            ),
        };
        results.push(r);
    }
    (StatusCode::OK, axum::Json(json!({ "results": results }))).into_response()
}

async fn sql(
    State(app): State<Arc<App>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match authorize(&app, &params, &headers) {
        Err(r) => r,
        Ok(()) => match query_param(&params, &method, &headers, body, 1 << 20).await {
            Err(r) => r,
            Ok(None) => error(
                StatusCode::BAD_REQUEST,
                "missing query: send SQL as the body or as q=",
            ),
            Ok(Some(q)) => run_sql(&app, q).await,
        },
    };
    observe(&app, "sql", started, &resp);
    resp
}

async fn run_sql(app: &Arc<App>, q: String) -> Response {
    if let Err(refusal) = app.guard.check(&q) {
        return error(StatusCode::FORBIDDEN, format!("query refused: {refusal}"));
    }
    let ct = sql_guard::requested_format(&q)
        .map(|f| sql_guard::content_type(&f))
        .unwrap_or("application/json");
    let app2 = app.clone();
    let result = tokio::task::spawn_blocking(move || app2.engine.read_query(&q)).await;
    match result {
        Ok(Ok(bytes)) => (StatusCode::OK, [(header::CONTENT_TYPE, ct)], bytes).into_response(),
        Ok(Err(e)) => {
            app.metrics.chdb_errors.with_label_values(&["query"]).inc();
            let msg = e.to_string();
            // Privilege errors from the read-only connection are refusals, not failures.
            if msg.contains("readonly") || msg.contains("READONLY") {
                error(StatusCode::FORBIDDEN, format!("query refused: {msg}"))
            } else {
                error(StatusCode::BAD_REQUEST, msg)
            }
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("query task failed: {e}"),
        ),
    }
}

async fn ping(State(app): State<Arc<App>>) -> Response {
    let _ = &app;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    h.insert(
        "X-Influxdb-Version",
        HeaderValue::from_static(INFLUX_COMPAT_VERSION),
    );
    h.insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    h.insert("X-Sluice-Version", HeaderValue::from_static(VERSION));
    resp
}

async fn health() -> Response {
    (
        StatusCode::OK,
        axum::Json(json!({ "status": "pass", "version": VERSION })),
    )
        .into_response()
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    if app.ready.load(Ordering::Acquire) {
        (StatusCode::OK, axum::Json(json!({ "ready": true }))).into_response()
    } else {
        let reason = if app.draining.load(Ordering::Acquire) {
            "draining"
        } else {
            "replaying write-ahead log"
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "ready": false, "reason": reason })),
        )
            .into_response()
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let app2 = app.clone();
    let body = tokio::task::spawn_blocking(move || {
        app2.refresh_gauges();
        app2.metrics.render()
    })
    .await
    .unwrap_or_default();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_from_every_place() {
        let mut h = HeaderMap::new();
        let none = HashMap::new();
        assert_eq!(credentials(&none, &h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Token abc"));
        assert_eq!(credentials(&none, &h).as_deref(), Some("abc"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic dTpzZWNyZXQ="),
        );
        assert_eq!(credentials(&none, &h).as_deref(), Some("secret"));
        assert!(parse_precision("h", false).is_ok());
        assert_eq!(
            parse_precision("h", true).unwrap_err(),
            "invalid precision \"h\" (use ns, us, ms or s)"
        );
        assert_eq!(
            parse_precision("xx", false).unwrap_err(),
            "invalid precision \"xx\" (use n, u, ms, s, m or h)"
        );
        let p: HashMap<String, String> = [
            ("u".to_string(), "x".to_string()),
            ("p".to_string(), "pw".to_string()),
        ]
        .into();
        assert_eq!(credentials(&p, &h).as_deref(), Some("pw"));
    }

    #[test]
    fn gzip_is_bounded() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&vec![b'a'; 100_000]).unwrap();
        let gz = Bytes::from(enc.finish().unwrap());
        assert_eq!(
            decompress(true, gz.clone(), 100_000).unwrap().len(),
            100_000
        );
        assert!(matches!(
            decompress(true, gz, 99_999),
            Err(DecodeError::TooLarge(_))
        ));
        assert!(matches!(
            decompress(true, Bytes::from_static(b"not gzip"), 10),
            Err(DecodeError::Gzip(_))
        ));
    }
}
