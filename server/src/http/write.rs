//! Writes: InfluxDB 1.x `/write` and 2.x `/api/v2/write`, from the request to the answer.
//! The stages (admit, read, decode and prepare, commit, answer) are separate functions so each
//! bound is applied in one place.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_core::precision::Precision;

use super::admission::{Reservation, PARSE_BYTES_PER_BODY_BYTE};
use super::body::{decompress, read_body, refusal, DecodeError};
use super::read::too_many_requests;
use super::{authorize, error, observe, retry_later};
use crate::app::App;
use crate::catalog::{CatalogError, Target};
use crate::ingest::{BodyFormat, Outcome, Prepared, WriteError};
use crate::wal::WalError;

/// Failed lines named in one error message.
const MAX_LISTED_ERRORS: usize = 10;

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

pub(super) async fn write_v1(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let place = app.admission.enter();
    let resp = match (place.is_some(), authorize(&app, &params, &headers)) {
        (false, _) => too_many_requests(&app),
        (true, Err(r)) => r,
        (true, Ok(())) => {
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

pub(super) async fn write_v2(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let place = app.admission.enter();
    let resp = match (place.is_some(), authorize(&app, &params, &headers)) {
        (false, _) => too_many_requests(&app),
        (true, Err(r)) => r,
        (true, Ok(())) => {
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
    match write_stages(app, p, headers, body).await {
        Ok((outcome, offered)) => answer(app, outcome, offered),
        Err(resp) => resp,
    }
}

/// The points of a parsed write, counted as offered only once its outcome is known: together
/// with the acknowledged and rejected ones ([`crate::metrics::Metrics::count_write`]), so that
/// no scrape sees a write offered and not yet answered. Counted at parse time, one write
/// committing at the scrape was read, at one request a second, as a tenth of the points
/// unacknowledged, and the autoscaler took the pod's knee down to that light load. Dropped
/// unanswered (the commit failed, the client went away), the points count as offered alone:
/// offered and not acknowledged.
struct Offered<'a> {
    app: &'a App,
    points: u64,
}

impl Offered<'_> {
    /// The points, no longer counted on drop: the caller counts them with their outcome.
    fn answered(mut self) -> u64 {
        std::mem::take(&mut self.points)
    }
}

impl Drop for Offered<'_> {
    fn drop(&mut self) {
        if self.points > 0 {
            self.app.metrics.count_write(0, 0, 0, self.points);
        }
    }
}

/// A write between its readiness check and its answer.
struct InFlight<'a>(&'a App);

impl<'a> InFlight<'a> {
    fn enter(app: &'a App) -> Self {
        app.writes_in_flight.fetch_add(1, Ordering::AcqRel);
        Self(app)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.writes_in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn write_stages<'a>(
    app: &'a Arc<App>,
    p: WriteParams,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Outcome, Offered<'a>), Response> {
    // Counted before the check, so that a decommission that starts after it waits for this
    // write to commit (or to be refused) before it reports the WAL empty.
    let _in_flight = InFlight::enter(app);
    if app.decommissioning() {
        // Closing the connection moves a kept-alive client, through the Service, to a pod
        // that stays.
        let mut r = retry_later(
            "this pod is being decommissioned: it takes no more writes; retry (through the tenant's Service, another pod takes them)",
        );
        r.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
        return Err(r);
    }
    if !app.ready.load(Ordering::Acquire) {
        return Err(retry_later("server is starting or shutting down; retry"));
    }
    let precision =
        parse_precision(&p.precision, p.v2).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    check_backlog(app)?;
    let target = resolve(app, &p)?;
    let mut memory = app.admission.reserve();
    let limits = &app.cfg.limits;
    let raw = read_body(
        body,
        headers,
        limits.max_body_bytes.0,
        limits.body_read_timeout,
        &mut memory,
    )
    .await
    .map_err(|e| {
        if matches!(e, super::body::BodyError::Busy) {
            app.metrics
                .backpressure
                .with_label_values(&["request_memory"])
                .inc();
        }
        refusal(e, limits.max_body_bytes.0, limits.body_read_timeout)
    })?;
    let (prepared, memory) = prepare(app, target, precision, headers, raw, memory).await?;
    let offered = Offered {
        app,
        points: (prepared.points + prepared.rejections.len() + prepared.over_limit) as u64,
    };
    if prepared.points > 0 {
        app.metrics.observe_payload(
            body_format(headers) == BodyFormat::Msgpack,
            is_gzip(headers),
            prepared.points,
            prepared.field_values,
        );
    }
    let outcome = app
        .ingest
        .commit(prepared)
        .await
        .map_err(|e| write_error(app, e));
    // Held until the entries are durable: requests waiting for the WAL's committer (up to
    // `wal_queue_depth` of them) hold their entries, uncounted they could hold more than the
    // whole request budget under overload.
    drop(memory);
    outcome.map(|o| (o, offered))
}

/// Writes wait while the flush is too far behind (the tables whose flush keeps failing do not
/// count: their points wait in the WAL without holding up everyone else's).
fn check_backlog(app: &App) -> Result<(), Response> {
    if let Some(refusal) = app.disk.refusal(&app.cfg.limits) {
        app.metrics
            .backpressure
            .with_label_values(&[refusal.label()])
            .inc();
        return Err(retry_later(refusal.to_string()));
    }
    let backlog = app.scheduler.backlog();
    let limit = app.cfg.limits.max_wal_backlog_bytes.0;
    // Failing tables may hold as much again, and no more: when every insert fails (the
    // engine's disk is full, say), writes must still stop before the WAL's disk fills too.
    if backlog.healthy_bytes > limit || backlog.bytes > limit.saturating_mul(2) {
        app.metrics
            .backpressure
            .with_label_values(&["flush_backlog"])
            .inc();
        return Err(retry_later(format!(
            "flush backlog is {} bytes ({} of them in tables whose flush is failing), above the limit of {}; retry",
            backlog.bytes,
            backlog.bytes - backlog.healthy_bytes,
            app.cfg.limits.max_wal_backlog_bytes
        )));
    }
    Ok(())
}

fn resolve(app: &App, p: &WriteParams) -> Result<Target, Response> {
    match app.ingest.catalog.resolve(&p.db, &p.rp, &app.ingest.wal) {
        Ok(t) => Ok(t),
        Err(
            e @ (CatalogError::DatabaseNotFound(_) | CatalogError::RetentionPolicyNotFound { .. }),
        ) => Err(error(StatusCode::NOT_FOUND, e.to_string())),
        Err(e @ (CatalogError::BadName { .. } | CatalogError::TooManyDatabases { .. })) => {
            Err(error(StatusCode::BAD_REQUEST, e.to_string()))
        }
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

fn is_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"))
}

fn body_format(headers: &HeaderMap) -> BodyFormat {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    match ct.as_deref() {
        Some("application/msgpack" | "application/x-msgpack") => BodyFormat::Msgpack,
        _ => BodyFormat::LineProtocol,
    }
}

/// Inflates and parses the body on one of the parse threads, charging what that takes to the
/// request's memory: the inflated body and its parse, up to [`PARSE_BYTES_PER_BODY_BYTE`] per
/// byte. The memory stays reserved until the request is answered.
async fn prepare(
    app: &Arc<App>,
    target: Target,
    precision: Precision,
    headers: &HeaderMap,
    raw: Bytes,
    mut memory: Reservation,
) -> Result<(Prepared, Reservation), Response> {
    let gzip = is_gzip(headers);
    let format = body_format(headers);
    let limit = app.cfg.limits.max_decompressed_bytes.0;
    let app2 = app.clone();
    let prepared = app
        .parse
        .run(move || {
            let raw_len = raw.len() as u64;
            // The inflated body and its parse are charged as the body inflates, chunk by chunk,
            // so a small body that inflates enormously is refused before it takes the memory.
            let body = decompress(gzip, raw, limit, &mut |inflated| {
                memory.grow_to(raw_len + inflated * (1 + PARSE_BYTES_PER_BODY_BYTE))
            })?;
            let inflated = if gzip { body.len() as u64 } else { 0 };
            let need = raw_len + inflated + body.len() as u64 * PARSE_BYTES_PER_BODY_BYTE;
            if !memory.grow_to(need) {
                return Err(DecodeError::Busy);
            }
            let prepared = app2.ingest.prepare(&target, precision, format, &body);
            Ok((prepared, memory))
        })
        .await;
    match prepared {
        Err(e) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("write task failed: {e}"),
        )),
        Ok(Err(DecodeError::TooLarge(limit))) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Request Entity Too Large: decompressed body exceeds the limit of {limit} bytes"
            ),
        )),
        Ok(Err(DecodeError::Gzip(e))) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("invalid gzip body: {e}"),
        )),
        Ok(Err(DecodeError::Busy)) => {
            app.metrics
                .backpressure
                .with_label_values(&["request_memory"])
                .inc();
            Err(retry_later(
                "request memory budget (limits.request_memory_bytes) is in use by other requests; retry",
            ))
        }
        Ok(Ok((Err(e), _))) => Err(write_error(app, e)),
        // What stays until the commit is the encoded entries and the parsed batches they
        // hand to the flush.
        Ok(Ok((Ok(p), mut memory))) => {
            memory.shrink_to(entries_bytes(&p));
            Ok((p, memory))
        }
    }
}

/// Memory a prepared write holds until it is durable: each entry's encoded payload and, about as
/// large again with its padding, the parsed batch kept for the flush.
fn entries_bytes(p: &Prepared) -> u64 {
    p.entries.iter().map(|e| e.payload.len() as u64 * 2).sum()
}

/// InfluxDB's answer for a write: 204, or the dropped lines.
fn answer(app: &App, outcome: Outcome, offered: Offered<'_>) -> Response {
    app.metrics.count_write(
        outcome.points as u64,
        outcome.dropped.saturating_sub(outcome.over_limit) as u64,
        outcome.over_limit as u64,
        offered.answered(),
    );
    if outcome.over_limit > 0 {
        // InfluxDB's words for its own limit; the per-request one is named by its setting.
        let message = if outcome.over_limit > outcome.request_series_limited {
            format!(
                "partial write: max-series limit exceeded: ({}) dropped={}",
                app.cfg.limits.max_series, outcome.dropped
            )
        } else {
            format!(
                "partial write: new series per request limit exceeded (limits.max_new_series_per_request: {}) dropped={}",
                app.cfg.limits.max_new_series_per_request, outcome.dropped
            )
        };
        return error(StatusCode::UNPROCESSABLE_ENTITY, message);
    }
    if outcome.dropped == 0 {
        return StatusCode::NO_CONTENT.into_response();
    }
    // As InfluxDB: a rejected point (type conflict, bad field name) is reported alone, the first
    // one; otherwise the lines that failed to parse are listed, one per line of the message. A
    // few are enough to act on, and a million bad lines must not make a message as large.
    let listed: Vec<&String> = match &outcome.first_rejected {
        Some(first) => vec![first],
        None => outcome.errors.iter().collect(),
    };
    let mut reason = listed[..listed.len().min(MAX_LISTED_ERRORS)]
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let unlisted = if outcome.first_rejected.is_some() {
        0
    } else {
        outcome.dropped - listed.len().min(MAX_LISTED_ERRORS)
    };
    if unlisted > 0 {
        reason.push_str(&format!("\n... and {unlisted} more"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_per_api() {
        assert!(parse_precision("h", false).is_ok());
        assert_eq!(
            parse_precision("h", true).unwrap_err(),
            "invalid precision \"h\" (use ns, us, ms or s)"
        );
        assert_eq!(
            parse_precision("xx", false).unwrap_err(),
            "invalid precision \"xx\" (use n, u, ms, s, m or h)"
        );
    }
}
