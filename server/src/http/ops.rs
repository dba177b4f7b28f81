//! Probes and scrapes: `/ping`, `/health`, `/ready`, `/metrics`. They take no place among the
//! requests in flight, so a busy server still answers its probes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::VERSION;
use crate::app::App;

/// What `/ping` reports as the InfluxDB version: the 1.x API sluice speaks.
const INFLUX_COMPAT_VERSION: &str = "1.8.10";

pub(super) async fn ping(State(app): State<Arc<App>>) -> Response {
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

pub(super) async fn health() -> Response {
    (
        StatusCode::OK,
        axum::Json(json!({ "status": "pass", "version": VERSION })),
    )
        .into_response()
}

pub(super) async fn ready(State(app): State<Arc<App>>) -> Response {
    // Tables whose flush keeps failing: the pod still takes writes (their points wait in the
    // WAL, and the other tables flush), so it stays ready, and says which tables are stuck.
    let failing: Vec<_> = app
        .scheduler
        .failing_tables()
        .into_iter()
        .map(|f| json!({ "table": f.table, "failures": f.failures, "error": f.error }))
        .collect();
    if app.ready.load(Ordering::Acquire) {
        (
            StatusCode::OK,
            axum::Json(json!({ "ready": true, "failing_tables": failing })),
        )
            .into_response()
    } else {
        let reason = if app.decommissioning() {
            "decommissioning"
        } else if app.draining.load(Ordering::Acquire) {
            "draining"
        } else if app.cluster.is_joining() {
            "telling the tenant's pods that it joins"
        } else {
            "replaying write-ahead log"
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "ready": false, "reason": reason, "failing_tables": failing })),
        )
            .into_response()
    }
}

pub(super) async fn metrics(State(app): State<Arc<App>>) -> Response {
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
