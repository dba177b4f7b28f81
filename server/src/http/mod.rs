//! The HTTP API: InfluxDB 1.x/2.x writes, `/query` for client start-up, `/sql` for reads, and
//! the operational endpoints. Status codes and error bodies follow InfluxDB 1.8 for the same
//! request; the README lists where sluice deliberately differs.
//!
//! Every request that does work (writes and reads) first takes a place among
//! `limits.max_requests_in_flight`, and its body's memory from `limits.request_memory_bytes`
//! ([`admission`]); what does not fit answers 503 with `Retry-After`, so that no number of
//! clients, however slow or large, can make the process run out of memory.

// Handlers return early with a finished `Response` as the error; boxing it would only move the
// allocation, not avoid it.
#![allow(clippy::result_large_err)]

mod accept;
mod admission;
mod body;
mod decommission;
mod influx_answer;
mod internal;
mod ops;
mod read;
mod write;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use serde_json::json;

use crate::app::App;

pub use admission::Admission;
pub(crate) use decommission::resume_writes;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/write", post(write::write_v1))
        .route("/api/v2/write", post(write::write_v2))
        .route("/query", get(read::query).post(read::query))
        .route("/sql", get(read::sql).post(read::sql))
        .route("/ping", get(ops::ping).head(ops::ping))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .route(
            "/decommission",
            get(decommission::handle)
                .post(decommission::handle)
                .delete(decommission::handle),
        )
        .route(
            crate::cluster::PARTIAL_PATH,
            get(internal::partial).head(internal::head),
        )
        .route(crate::handoff::HANDOFF_PATH, post(internal::handoff))
        .route(crate::cluster::PEERS_PATH, post(internal::peers))
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

pub(crate) fn retry_later(message: impl Into<String>) -> Response {
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
        let p: HashMap<String, String> = [
            ("u".to_string(), "x".to_string()),
            ("p".to_string(), "pw".to_string()),
        ]
        .into();
        assert_eq!(credentials(&p, &h).as_deref(), Some("pw"));
    }
}
