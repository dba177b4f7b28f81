//! Reads: `/query` (InfluxQL) and `/sql` (ClickHouse SQL), each statement within the limits of
//! `[query]`, its result streamed to the client as the engine produces it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::body::read_body;
use super::influx_answer::Format;
use super::{authorize, error, observe, retry_later};
use crate::app::App;
use crate::engine::{QueryError, ReadSettings, Readers};
use crate::query::remember::SeriesAnswers;
use crate::sql_guard;

/// Largest query text accepted.
const MAX_QUERY_BYTES: u64 = 1 << 20;

/// Chunks of a result buffered between the engine and the client: the engine waits when the
/// client reads slowly, so a large result never sits in memory whole.
const STREAM_CHUNKS: usize = 4;

/// A read's texts: `q`, and `/sql`'s `inner` (run on every pod of the tenant); `params`: the
/// query string's parameters with a form body's over them.
#[derive(Default)]
struct Texts {
    q: Option<String>,
    inner: Option<String>,
    params: HashMap<String, String>,
}

/// The parameters a form body may carry. InfluxDB 1.x reads `db`, `rp`, `epoch` and the rest
/// with `FormValue`, where a form body's value wins over the query string's, and clients such
/// as `curl --data-urlencode db=... --data-urlencode q=...` send them there.
const FORM_PARAMS: &[&str] = &[
    "q",
    "inner",
    "db",
    "rp",
    "epoch",
    "params",
    "partial",
    "pretty",
    "chunked",
    "chunk_size",
    "u",
    "p",
];

/// A body's pairs when it is a form: it has `q`, or names only parameters of [`FORM_PARAMS`].
/// curl sends raw SQL with the form content type by default, and `SELECT a=1` would parse as
/// a form too, so a body naming anything else is a query text.
fn form_pairs(raw: &[u8]) -> Option<Vec<(String, String)>> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(raw).ok()?;
    let has_q = pairs.iter().any(|(k, _)| k == "q");
    let all_known =
        !pairs.is_empty() && pairs.iter().all(|(k, _)| FORM_PARAMS.contains(&k.as_str()));
    (has_q || all_known).then_some(pairs)
}

/// `q` (and `inner`) from the query string or, for POST, from a form body; a body that is
/// not a form is `q` unless the query string has one.
async fn query_param(
    app: &App,
    params: &HashMap<String, String>,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Result<Texts, Response> {
    let from_url = |params: HashMap<String, String>| Texts {
        q: params.get("q").cloned(),
        inner: params.get("inner").cloned(),
        params,
    };
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if method != Method::POST || (params.contains_key("q") && !is_form) {
        return Ok(from_url(params.clone()));
    }
    let mut memory = app.admission.reserve();
    let raw = read_body(
        body,
        headers,
        MAX_QUERY_BYTES,
        app.cfg.limits.body_read_timeout,
        &mut memory,
    )
    .await
    .map_err(|e| super::body::refusal(e, MAX_QUERY_BYTES, app.cfg.limits.body_read_timeout))?;
    if let Some(pairs) = is_form.then(|| form_pairs(&raw)).flatten() {
        let mut merged = params.clone();
        // The first of a name wins, as `FormValue` takes it.
        for (k, v) in pairs.into_iter().rev() {
            merged.insert(k, v);
        }
        return Ok(from_url(merged));
    }
    if params.contains_key("q") || raw.is_empty() {
        return Ok(from_url(params.clone()));
    }
    Ok(Texts {
        q: Some(String::from_utf8_lossy(&raw).into_owned()),
        inner: params.get("inner").cloned(),
        params: params.clone(),
    })
}

pub(super) async fn query(
    State(app): State<Arc<App>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match app.admission.enter() {
        None => too_many_requests(&app),
        Some(_place) => match authorize(&app, &params, &headers) {
            Err(r) => r,
            Ok(()) => match query_param(&app, &params, &method, &headers, body).await {
                Err(r) => r,
                Ok(Texts { q: None, .. }) => {
                    error(StatusCode::BAD_REQUEST, "missing required parameter \"q\"")
                }
                Ok(Texts {
                    q: Some(q), params, ..
                }) => {
                    let format = Format::of(&params, &headers);
                    influx_query(&app, q, &params, format).await
                }
            },
        },
    };
    observe(&app, "query", started, &resp);
    resp
}

pub(super) fn too_many_requests(app: &App) -> Response {
    app.metrics
        .backpressure
        .with_label_values(&["requests_in_flight"])
        .inc();
    retry_later(format!(
        "too many requests in flight (limits.max_requests_in_flight = {}); retry",
        app.admission.max_requests()
    ))
}

/// Runs an InfluxQL request on a blocking thread (planning reads the catalog, the engine
/// blocks) and answers in InfluxDB's shape ([`super::influx_answer`]).
async fn influx_query(
    app: &Arc<App>,
    q: String,
    params: &HashMap<String, String>,
    format: Format,
) -> Response {
    let app2 = app.clone();
    let (db, rp, epoch) = (
        params.get("db").cloned(),
        params.get("rp").cloned(),
        params
            .get("epoch")
            .cloned()
            .or_else(|| format.default_epoch().map(str::to_string)),
    );
    let bound = params.get("params").cloned();
    let partial = params
        .get("partial")
        .is_some_and(|p| p == "true" || p == "1");
    let answer = tokio::task::spawn_blocking(move || {
        let req = crate::query::Request {
            q: &q,
            db: db.as_deref(),
            rp: rp.as_deref(),
            epoch: epoch.as_deref(),
            partial,
            params: bound.as_deref(),
        };
        crate::query::run(&app2, &req)
    })
    .await;
    match answer {
        Ok(answer) => format.respond(answer),
        Err(e) => task_failed(e),
    }
}

pub(super) async fn sql(
    State(app): State<Arc<App>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let resp = match app.admission.enter() {
        None => too_many_requests(&app),
        Some(place) => match authorize(&app, &params, &headers) {
            Err(r) => r,
            Ok(()) => match query_param(&app, &params, &method, &headers, body).await {
                Err(r) => r,
                Ok(Texts { q: None, .. }) => error(
                    StatusCode::BAD_REQUEST,
                    "missing query: send SQL as the body or as q=",
                ),
                Ok(Texts {
                    q: Some(q),
                    inner: None,
                    ..
                }) => run_sql(&app, q, Some(place)).await,
                Ok(Texts {
                    q: Some(q),
                    inner: Some(inner),
                    params,
                }) => {
                    let partial = params
                        .get("partial")
                        .is_some_and(|p| p == "true" || p == "1");
                    run_tenant_sql(&app, q, inner, partial, Some(place)).await
                }
            },
        },
    };
    observe(&app, "sql", started, &resp);
    resp
}

/// Checks `q` twice (tokens, then the engine's own parse of it), then runs it and streams its
/// result. The status is decided by the first chunk: an error before any output is a proper
/// error answer; one after (a limit hit midway) ends the stream early, which the client sees
/// as a broken chunked response.
async fn run_sql(
    app: &Arc<App>,
    q: String,
    place: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Response {
    let tree = match checked(app, &q).await {
        Ok(tree) => tree,
        Err(r) => return r,
    };
    let streamed = tree.starts_with("Select");
    match stream_on(app, Readers::Local, q.clone(), streamed, place).await {
        Ok(body) => sql_answer(&q, body, "local", &[]),
        Err(r) => r,
    }
}

/// `/sql` across the tenant: `inner` runs on every pod, `q` reads their answers as the table
/// `tenant` (see [`crate::query::gather::tenant_sql`]).
async fn run_tenant_sql(
    app: &Arc<App>,
    q: String,
    inner: String,
    partial: bool,
    mut place: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Response {
    let mut merges = false;
    for text in [&inner, &q] {
        let tree = match checked(app, text).await {
            Ok(tree) => tree,
            Err(r) => return r,
        };
        if !tree.starts_with("Select") {
            return error(
                StatusCode::BAD_REQUEST,
                "with inner, both inner and q must be SELECT queries",
            );
        }
        merges = merges || (text == &inner && crate::sql_guard::calls(&tree, "merge"));
    }
    let readers = if app.engine.gathers() {
        Readers::Gather
    } else {
        Readers::Local
    };
    // A pod that handed a table over since the tenant's view was gathered refuses its share;
    // the read runs once more on a fresh view (as InfluxQL's does).
    for attempt in 0..2 {
        let (app2, inner2, q2) = (app.clone(), inner.clone(), q.clone());
        let planned = tokio::task::spawn_blocking(move || {
            crate::query::gather::tenant_sql(&app2, &inner2, &q2, partial, merges)
        })
        .await;
        let (sql, missing) = match planned {
            Ok(Ok(p)) => p,
            Ok(Err(msg)) if msg == crate::query::gather::HANDOFF_UNDER_WAY => {
                return super::retry_later(msg)
            }
            Ok(Err(msg)) => return error(StatusCode::BAD_REQUEST, msg),
            Err(e) => return task_failed(e),
        };
        match start_stream(
            app,
            readers,
            ReadSettings::default(),
            sql,
            true,
            &mut place,
            None,
        )
        .await
        {
            Ok(body) => return sql_answer(&q, body, "tenant", &missing),
            Err(Some(QueryError::Engine(msg)))
                if attempt == 0 && msg.contains(crate::handoff::STALE_VIEW) =>
            {
                app.metrics
                    .read_retried(crate::metrics::READ_RETRY_STALE_VIEW);
                app.views.clear();
            }
            Err(e) => return failed_stream(app, e),
        }
    }
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the tenant's view of its hand-offs kept changing",
    )
}

/// Checks `q` twice (tokens, then the engine's own parse of it); the parse tree on success.
pub(super) async fn checked(app: &Arc<App>, q: &str) -> Result<String, Response> {
    if let Err(refusal) = app.guard.check(q) {
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("query refused: {refusal}"),
        ));
    }
    let wait = app.cfg.query.queue_timeout;
    let (app2, q2) = (app.clone(), q.to_string());
    let tree = tokio::task::spawn_blocking(move || app2.engine.explain_ast(&q2, wait)).await;
    let tree = match tree {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(query_error(app, e)),
        Err(e) => return Err(task_failed(e)),
    };
    if let Err(refusal) = app.guard.check_ast(&tree) {
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("query refused: {refusal}"),
        ));
    }
    Ok(tree)
}

/// A `/sql` answer: the body in the format `q` asked for, and `X-Sluice-Scope` saying whose
/// data it read: `local` (this pod's tables only) or `tenant` (every pod's, through `inner`).
fn sql_answer(q: &str, body: Body, scope: &'static str, missing: &[String]) -> Response {
    let ct = sql_guard::requested_format(q)
        .map(|f| sql_guard::content_type(&f))
        .unwrap_or("application/json");
    let mut resp = (StatusCode::OK, [(header::CONTENT_TYPE, ct)], body).into_response();
    resp.headers_mut()
        .insert("X-Sluice-Scope", HeaderValue::from_static(scope));
    if !missing.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&missing.join(", ")) {
            resp.headers_mut().insert("X-Sluice-Partial", v);
        }
    }
    resp
}

/// Starts `q` on a blocking thread and answers with its output as a streamed body, once the
/// first chunk (or the error) is there.
pub(super) async fn stream_on(
    app: &Arc<App>,
    readers: Readers,
    q: String,
    streamed: bool,
    mut place: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<Body, Response> {
    start_stream(
        app,
        readers,
        ReadSettings::default(),
        q,
        streamed,
        &mut place,
        None,
    )
    .await
    .map_err(|e| failed_stream(app, e))
}

/// Why a stream did not start: the engine's error, or the query task's end without one.
pub(super) fn failed_stream(app: &App, e: Option<QueryError>) -> Response {
    match e {
        Some(e) => query_error(app, e),
        None => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "query task ended without an answer",
        ),
    }
}

/// An answer to keep once its stream ends whole: the output of `sql`, which reads nothing but
/// the series table, run under the series table's write count `writes` (see
/// [`SeriesAnswers`]).
pub(super) struct Keep {
    pub sql: String,
    pub writes: u64,
}

/// [`stream_on`] with `settings` beyond the pool's (see [`ReadSettings`]); the
/// request's `place` moves into the body only when the stream starts, so that a caller may
/// run the query again after an error.
pub(super) async fn start_stream(
    app: &Arc<App>,
    readers: Readers,
    settings: ReadSettings,
    q: String,
    streamed: bool,
    place: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    keep: Option<Keep>,
) -> Result<Body, Option<QueryError>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(STREAM_CHUNKS);
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<Result<(), QueryError>>();
    let (app2, wait) = (app.clone(), app.cfg.query.queue_timeout);
    // A client that stops reading must not hold a query connection past the query's own time
    // limit: past it, the stream is dropped (and its connection replaced).
    let deadline = Instant::now() + wait + app.cfg.query.timeout;
    tokio::task::spawn_blocking(move || {
        let mut first = Some(first_tx);
        let mut kept = keep.as_ref().map(|_| Vec::new());
        let result = {
            let mut sink = |chunk: Vec<u8>| {
                if let Some(f) = first.take() {
                    let _ = f.send(Ok(()));
                }
                kept = kept.take().and_then(|mut buf| {
                    (buf.len() + chunk.len() <= SeriesAnswers::MAX_KEPT).then(|| {
                        buf.extend_from_slice(&chunk);
                        buf
                    })
                });
                let sent = send_until(&tx, Bytes::from(chunk), deadline);
                if !sent {
                    // Cut short: not the whole answer.
                    kept = None;
                }
                sent
            };
            app2.engine
                .stream_with(readers, &settings, &q, streamed, wait, &mut sink)
        };
        if let (Ok(()), Some(k)) = (&result, keep) {
            app2.series_answers
                .read(&k.sql, k.writes, kept.map(Into::into));
        }
        match (result, first.take()) {
            (Ok(()), Some(f)) => {
                let _ = f.send(Ok(()));
            }
            (Err(e), Some(f)) => {
                let _ = f.send(Err(e));
            }
            (Err(e), None) => {
                app2.metrics.chdb_errors.with_label_values(&["query"]).inc();
                tracing::warn!(error = %e, "query failed after its first chunk; ending the stream");
                let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
            (Ok(()), None) => {}
        }
    });
    match first_rx.await {
        Ok(Ok(())) => Ok(Body::new(ChunkBody {
            rx,
            _place: place.take(),
        })),
        Ok(Err(e)) => Err(Some(e)),
        Err(_) => Err(None),
    }
}

/// Hands `chunk` to the client's body, waiting while the client reads slowly, but not past
/// `deadline`; false when the client is gone or too slow.
fn send_until(
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    chunk: Bytes,
    deadline: Instant,
) -> bool {
    use tokio::sync::mpsc::error::TrySendError;
    let mut chunk = Ok(chunk);
    loop {
        match tx.try_send(chunk) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(back)) => {
                if Instant::now() >= deadline {
                    return false;
                }
                chunk = back;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

/// A body fed by the query thread, chunk by chunk. It holds the request's place among those
/// in flight until the client has read it all.
struct ChunkBody {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    _place: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl http_body::Body for ChunkBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|c| c.map(|r| r.map(http_body::Frame::data)))
    }
}

pub(super) fn task_failed(e: tokio::task::JoinError) -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("query task failed: {e}"),
    )
}

/// The answer for a query the engine refused or stopped, naming the limit it hit.
pub(super) fn query_error(app: &App, e: QueryError) -> Response {
    let msg = match e {
        QueryError::Busy(n) => {
            app.metrics
                .backpressure
                .with_label_values(&["query_connections"])
                .inc();
            return retry_later(format!(
                "all {n} query connections (pool.connections) are busy for longer than query.queue_timeout ({}); retry",
                sluice_core::config::format_duration(app.cfg.query.queue_timeout)
            ));
        }
        QueryError::Engine(msg) => msg,
    };
    app.metrics.chdb_errors.with_label_values(&["query"]).inc();
    match crate::query::limit_hit(&app.cfg.query, &msg) {
        Some(limit) => error(
            StatusCode::BAD_REQUEST,
            format!(
                "query stopped: it exceeded {limit}: {}",
                crate::query::engine_words(&msg)
            ),
        ),
        // Privilege errors from the read-only connection are refusals, not failures.
        None if msg.contains("readonly") || msg.contains("READONLY") => {
            error(StatusCode::FORBIDDEN, format!("query refused: {msg}"))
        }
        None => error(StatusCode::BAD_REQUEST, msg),
    }
}

#[cfg(test)]
mod tests {
    use super::form_pairs;

    #[test]
    fn a_form_has_q_or_names_only_parameters() {
        let pairs = form_pairs(b"db=g&q=SELECT+1&epoch=s").expect("a form");
        assert_eq!(pairs[0], ("db".to_string(), "g".to_string()));
        assert_eq!(pairs[1], ("q".to_string(), "SELECT 1".to_string()));
        assert!(form_pairs(b"db=g").is_some());
        assert!(form_pairs(b"q=SHOW+DATABASES&anything=1").is_some());
    }

    #[test]
    fn raw_sql_is_not_a_form() {
        // curl -d sends these with the form content type.
        assert!(form_pairs(b"SELECT a=1 FROM t").is_none());
        assert!(form_pairs(b"SELECT 1").is_none());
        assert!(form_pairs(b"").is_none());
    }
}
