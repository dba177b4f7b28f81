//! `/decommission`: the first half of a pod's leaving the tenant. `POST` starts it: the pod
//! stops being ready, answers new writes 503 with `Retry-After` and closes their connections
//! (kept-alive clients reconnect, through the Service, to a pod that stays), lets requests in
//! flight finish, and flushes its WAL into its tables until nothing is left. `GET` reports the
//! phase (`draining` while points wait in the WAL, `flushed` once none do); `DELETE` cancels, and
//! the pod takes writes again with whatever it holds. Every call is idempotent. Handing the
//! tables to the pods that stay is not part of this yet.
//!
//! Only the tenant's pods' token (`cluster.token`) may call it; without one, the write path's
//! authentication applies.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{authorize, error};
use crate::app::App;

fn admin(app: &App, params: &HashMap<String, String>, headers: &HeaderMap) -> Result<(), Response> {
    let Some(token) = app.cluster.token() else {
        return authorize(app, params, headers);
    };
    if super::internal::presents(headers, token) {
        Ok(())
    } else {
        Err(error(
            StatusCode::UNAUTHORIZED,
            "decommissioning needs the tenant's cluster token",
        ))
    }
}

/// The decommission's state as JSON.
fn status(app: &App) -> serde_json::Value {
    let since = *app
        .decommissioned_since
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let Some(since) = since else {
        return json!({ "phase": "none" });
    };
    let b = app.scheduler.backlog();
    let writing = app.writes_in_flight.load(Ordering::Acquire);
    let phase = if b.rows == 0 && writing == 0 {
        "flushed"
    } else {
        "draining"
    };
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    json!({
        "phase": phase,
        "since_unix_seconds": since,
        "wal_backlog_points": b.rows,
        "wal_backlog_bytes": b.bytes,
        "writes_in_flight": writing,
    })
}

/// `POST` starts, `GET` reports, `DELETE` cancels.
pub(super) async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admin(&app, &params, &headers) {
        return r;
    }
    match method {
        Method::POST => start(&app),
        Method::DELETE => cancel(&app),
        _ => (StatusCode::OK, axum::Json(status(&app))).into_response(),
    }
}

fn start(app: &App) -> Response {
    if !app.ready.load(Ordering::Acquire) && !app.decommissioning() {
        return error(
            StatusCode::CONFLICT,
            "the pod is starting or shutting down; decommission it once it is ready",
        );
    }
    {
        let mut since = app
            .decommissioned_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            *since = Some(SystemTime::now());
            app.ready.store(false, Ordering::Release);
            app.metrics.ready.set(0);
            app.scheduler.drain();
            tracing::info!("decommissioning: writes refused, flushing the WAL");
        }
    }
    (StatusCode::ACCEPTED, axum::Json(status(app))).into_response()
}

fn cancel(app: &App) -> Response {
    let mut since = app
        .decommissioned_since
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if since.take().is_some() && !app.draining.load(Ordering::Acquire) {
        app.scheduler.stop_draining();
        app.ready.store(true, Ordering::Release);
        app.metrics.ready.set(1);
        tracing::info!("decommission cancelled: taking writes again");
    }
    drop(since);
    (StatusCode::OK, axum::Json(status(app))).into_response()
}
