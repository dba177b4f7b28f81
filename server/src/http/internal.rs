//! `GET /internal/v1/partial`: a pod's share of a read that another pod of the tenant
//! gathers (see [`crate::cluster`]). Only pods holding the tenant's `cluster.token` may ask;
//! without a token the endpoint does not exist.
//!
//! It takes no place among the requests in flight: the gathering pod's request holds one
//! already, and a share that had to wait for a place behind gathering requests could wait on
//! them forever.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::read::{checked, failed_stream, query_error, start_stream, task_failed, Keep};
use super::{error, observe};
use crate::app::App;
use crate::cluster::Partial;
use crate::engine::ReadSettings;

pub(super) async fn partial(
    State(app): State<Arc<App>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let resp = answer(&app, &params, &headers).await;
    observe(&app, "partial", started, &resp);
    resp
}

/// A HEAD would have to run the share to know its status: refused, so that nothing runs a
/// pod's share twice.
pub(super) async fn head() -> Response {
    StatusCode::METHOD_NOT_ALLOWED.into_response()
}

/// Only the tenant's pods may call the internal endpoints; without a token they do not exist.
fn peer_only(app: &App, headers: &HeaderMap) -> Result<(), Response> {
    let Some(token) = app.cluster.token() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "this pod has no cluster.token: it does not answer other pods",
        ));
    };
    if !presents(headers, token) {
        return Err(error(StatusCode::UNAUTHORIZED, "not a pod of this tenant"));
    }
    Ok(())
}

async fn answer(app: &Arc<App>, params: &HashMap<String, String>, headers: &HeaderMap) -> Response {
    if let Err(r) = peer_only(app, headers) {
        return r;
    }
    let what = match params.get("p").map(|p| Partial::decode(p)) {
        Some(Ok(w)) => w,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, e),
        None => return error(StatusCode::BAD_REQUEST, "missing p"),
    };
    let mut settings = ReadSettings::default();
    // For `/sql`: the tables this pod had handed over when its filters were set; one dropped
    // after that reads as no table, which must not count as no rows (see below).
    let mut handed_before = None;
    match &what {
        Partial::Ping => return (StatusCode::OK, "ok").into_response(),
        Partial::SeriesVersion => {
            return (StatusCode::OK, app.engine.series_version()).into_response()
        }
        Partial::Catalog => return catalog(app),
        Partial::DescribeSql { q } => {
            // An inner query passes this pod's guard too, whoever sent it: a pod trusts only
            // its own check.
            if let Err(r) = checked(app, q).await {
                return r;
            }
            return describe_sql(app, q.clone()).await;
        }
        Partial::Sql { q, handed } => {
            let tree = match checked(app, q).await {
                Ok(tree) => tree,
                Err(r) => return r,
            };
            let view = crate::handoff::from_pairs(handed);
            handed_before = app.handoff.handed_away().map(|(_, t)| t);
            match crate::query::partial::sql_filters(app, &view) {
                // `merge()` reads tables by pattern, past the filters.
                Ok(Some(_)) if crate::sql_guard::calls(&tree, "merge") => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        crate::query::gather::HANDOFF_UNDER_WAY,
                    )
                }
                Ok(f) => settings.table_filters = f,
                Err(stale) => return error(StatusCode::BAD_REQUEST, stale),
            }
        }
        _ => {}
    }
    let is_sql = matches!(what, Partial::Sql { .. });
    let is_select = matches!(what, Partial::Select { .. });
    let lists_series = matches!(what, Partial::Series { .. } | Partial::TagValues { .. });
    if is_select {
        // The planner checks the view against what this pod has handed over; a table handed
        // and dropped after that check reads as no table (see below).
        handed_before = app.handoff.handed_away().map(|(_, t)| t);
    }
    let app2 = app.clone();
    let sql = tokio::task::spawn_blocking(move || crate::query::partial::sql(&app2, &what)).await;
    let sql = match sql {
        Ok(Ok(Some(planned))) => {
            settings = ReadSettings {
                table_filters: settings.table_filters,
                ..planned.settings
            };
            planned.sql
        }
        Ok(Ok(None)) => return error(StatusCode::BAD_REQUEST, "nothing to run"),
        Ok(Err(msg)) => return error(StatusCode::BAD_REQUEST, msg),
        Err(e) => return task_failed(e),
    };
    // What a share became, for `SLUICE_LOG=sluice_server::http=debug`, as the gathering pod
    // logs its own planned queries.
    tracing::debug!(%sql, "planned share");
    let sql = format!("{sql} FORMAT Native");
    let native = |body| {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            body,
        )
            .into_response()
    };
    let mut keep = None;
    if lists_series {
        match kept_share(app, &sql) {
            Ok(out) => return native(axum::body::Body::from(out)),
            Err(k) => keep = Some(k),
        }
    }
    let started = start_stream(
        app,
        crate::engine::Readers::Local,
        settings,
        sql,
        true,
        &mut None,
        keep,
    )
    .await
    .map_err(|e| failed_stream(app, e));
    match started {
        Ok(body) => native(body),
        // A table is created on a pod by its first write there: a pod without it holds none
        // of its rows, which is an answer of no rows (no blocks), not an error.
        Err(r) if (is_sql || is_select) && r.status() == StatusCode::BAD_REQUEST => {
            let text = axum::body::to_bytes(r.into_body(), 1 << 16)
                .await
                .unwrap_or_default();
            if !String::from_utf8_lossy(&text).contains("UNKNOWN_TABLE") {
                (StatusCode::BAD_REQUEST, text).into_response()
            } else if app.handoff.handed_away().map(|(_, t)| t) != handed_before {
                // Handed over and dropped between the filters and the read: the filters
                // counted the table here, so the receiver leaves its copy out. The view is
                // stale; the gathering pod reads again.
                error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "{}: this pod handed a table over during the read",
                        crate::handoff::STALE_VIEW
                    ),
                )
            } else if is_sql {
                native(axum::body::Body::empty())
            } else {
                (StatusCode::BAD_REQUEST, text).into_response()
            }
        }
        Err(r) => r,
    }
}

/// A share of the series table (a `SHOW`'s, `sql`) as kept while the table is unchanged, or
/// what to keep of it once read: a `SHOW` across the tenant costs each pod a listing of every
/// series it holds.
fn kept_share(app: &App, sql: &str) -> Result<Vec<u8>, Keep> {
    let writes = app.engine.series_writes();
    match app.series_answers.kept(sql, writes) {
        Some(out) => Ok(out.to_vec()),
        None => Err(Keep {
            sql: sql.to_string(),
            writes,
        }),
    }
}

/// `POST /internal/v1/peers?join=<name>` or `?leave=<name>`: a pod of the tenant announcing
/// itself (see [`crate::cluster::announce`]). Answers the pods this pod reads from now.
pub(super) async fn peers(
    State(app): State<Arc<App>>,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let started = Instant::now();
    let resp = announced(&app, from, &params, &headers);
    observe(&app, "peers", started, &resp);
    resp
}

/// A pod joins from its own address (pods reach each other without address translation), so
/// the pods it joins reach it there even while the cluster DNS still answers an old one
/// (except from a loopback address: see [`crate::cluster::Cluster::record`]).
fn announced(
    app: &App,
    from: SocketAddr,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    use crate::cluster::announce::Announce;
    if let Err(r) = peer_only(app, headers) {
        return r;
    }
    let (what, name) = match (params.get("join"), params.get("leave")) {
        (Some(n), None) => (Announce::Join, n),
        (None, Some(n)) => (Announce::Leave, n),
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "name one pod: join=<host:port> or leave=<host:port>",
            )
        }
    };
    match app.cluster.record(what, name, from.ip()) {
        Ok(peers) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({ "peers": peers })),
        )
            .into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, e),
    }
}

/// `POST /internal/v1/handoff`: a leaving pod asks this one to receive its data (see
/// [`crate::handoff::receive`]); refusals (no room, a field of another type) answer 409.
pub(super) async fn handoff(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let started = Instant::now();
    let resp = receive(&app, peer, &headers, &body).await;
    observe(&app, "handoff", started, &resp);
    resp
}

async fn receive(app: &Arc<App>, peer: SocketAddr, headers: &HeaderMap, body: &[u8]) -> Response {
    if let Err(r) = peer_only(app, headers) {
        return r;
    }
    let ask: crate::handoff::receive::Ask = match serde_json::from_slice(body) {
        Ok(a) => a,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("bad hand-off request: {e}"),
            )
        }
    };
    let app2 = app.clone();
    let done =
        tokio::task::spawn_blocking(move || crate::handoff::receive::answer(&app2, peer.ip(), ask))
            .await;
    match done {
        Ok(Ok(v)) => (StatusCode::OK, axum::Json(v)).into_response(),
        Ok(Err(e)) if e.is_refusal() => error(StatusCode::CONFLICT, e.to_string()),
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(e) => task_failed(e),
    }
}

fn catalog(app: &App) -> Response {
    let mut rows = crate::query::view::View::local(&app.ingest.catalog).rows();
    if let Some((id, handed)) = app.handoff.handed_away() {
        rows.extend(
            handed
                .into_iter()
                .map(|t| crate::query::view::CatalogRow::handed(id, t)),
        );
    }
    rows.extend(
        app.handoff
            .receiving()
            .into_iter()
            .map(crate::query::view::CatalogRow::receiving),
    );
    let mut out = Vec::new();
    for r in rows {
        if serde_json::to_writer(&mut out, &r).is_ok() {
            out.push(b'\n');
        }
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        out,
    )
        .into_response()
}

/// Whether `headers` carry `Authorization: Bearer <token>`.
pub(super) fn presents(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|p| same_secret(p.as_bytes(), token.as_bytes()))
}

/// Compares two secrets in time that depends on their lengths only, not on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The columns of a `/sql` inner query here, as `{"name", "type", "position"}` lines; none
/// when this pod cannot run it (no such table here), so that the gathering pod takes them
/// from a pod that can.
async fn describe_sql(app: &Arc<App>, q: String) -> Response {
    let app2 = app.clone();
    let wait = app.cfg.query.queue_timeout;
    let described = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let sql = format!("DESCRIBE TABLE ({q}) FORMAT JSONCompactEachRow");
        app2.engine
            .stream_query(&sql, false, wait, &mut |chunk| {
                out.extend_from_slice(&chunk);
                true
            })
            .map(|()| out)
    })
    .await;
    let text = match described {
        Ok(Ok(out)) => out,
        Ok(Err(crate::engine::QueryError::Engine(_))) => Vec::new(),
        Ok(Err(e)) => return query_error(app, e),
        Err(e) => return task_failed(e),
    };
    let mut out = Vec::new();
    for (i, line) in text.split(|b| *b == b'\n').enumerate() {
        let Ok(serde_json::Value::Array(cols)) = serde_json::from_slice(line) else {
            continue;
        };
        let row = serde_json::json!({ "name": cols.first(), "type": cols.get(1), "position": i });
        if serde_json::to_writer(&mut out, &row).is_ok() {
            out.push(b'\n');
        }
    }
    (StatusCode::OK, out).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_compare_whole() {
        assert!(super::same_secret(b"abc", b"abc"));
        assert!(!super::same_secret(b"abc", b"abd"));
        assert!(!super::same_secret(b"abc", b"abcd"));
        assert!(!super::same_secret(b"", b"a"));
    }
}
