//! `/decommission`: the first half of a pod's leaving the tenant. `POST` starts it: the pod
//! stops being ready, answers new writes 503 with `Retry-After` and closes their connections
//! (kept-alive clients reconnect, through the Service, to a pod that stays), lets requests in
//! flight finish, and flushes its WAL into its tables until nothing is left. `GET` reports the
//! phase (`draining` while points wait in the WAL, `flushed` once none do); `DELETE` cancels, and
//! the pod takes writes again with whatever it holds. Every call is idempotent. With
//! `to=host:port` the pod then hands every table to that pod ([`crate::handoff`]) and reports
//! `empty` when none is left; the decommission is recorded on the data volume, so a pod
//! restarted in the middle resumes it.
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
use crate::handoff::new_id;
use crate::handoff::state::{Leaving, Step};

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
    let leaving = app.handoff.leaving();
    let flushed = b.rows == 0 && writing == 0;
    let phase = match leaving.as_ref().map(|l| l.step) {
        Some(Step::Handing) => "handing_over",
        Some(Step::Finishing) => "finishing",
        Some(Step::Empty) => "empty",
        Some(Step::Cancelling) => "cancelling",
        Some(Step::Draining) | None if !flushed => "draining",
        Some(Step::Draining) | None => match leaving.as_ref().and_then(|l| l.refused.as_ref()) {
            Some(_) => "refused",
            None if leaving.as_ref().is_some_and(|l| l.receiver.is_some()) => "handing_over",
            None => "flushed",
        },
    };
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut out = json!({
        "phase": phase,
        "since_unix_seconds": since,
        "wal_backlog_points": b.rows,
        "wal_backlog_bytes": b.bytes,
        "writes_in_flight": writing,
    });
    if let Some(l) = leaving {
        let tables = l.tables.len();
        let handed = l.tables.values().filter(|t| t.handed).count();
        let rows: u64 = l.tables.values().map(|t| t.rows()).sum();
        let done: u64 = l
            .tables
            .values()
            .map(|t| if t.handed { t.rows() } else { t.rows_done() })
            .sum();
        out["handoff"] = json!({
            "id": l.id,
            "receiver": l.receiver,
            "tables": tables,
            "tables_handed": handed,
            "rows_planned": rows,
            "rows_copied": done,
            "refused": l.refused,
            "last_error": app.handoff.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        });
    }
    out
}

/// `POST` starts (with `to=host:port`, handing the data to that pod once flushed), `GET`
/// reports, `DELETE` cancels.
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
        Method::POST => start(&app, params.get("to").map(String::as_str)),
        // Taking writes again first announces the pod to the others (blocking).
        Method::DELETE => match tokio::task::spawn_blocking(move || cancel(&app)).await {
            Ok(r) => r,
            Err(e) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cancel failed: {e}"),
            ),
        },
        _ => (StatusCode::OK, axum::Json(status(&app))).into_response(),
    }
}

fn start(app: &Arc<App>, to: Option<&str>) -> Response {
    if let Some(to) = to {
        if !crate::cluster::valid_peer(to) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("to={to:?} is not host:port of a pod of the tenant"),
            );
        }
        if app.cluster.token().is_none() {
            return error(
                StatusCode::BAD_REQUEST,
                "handing data over needs the tenant's cluster.token",
            );
        }
    }
    if !app.ready.load(Ordering::Acquire) && !app.decommissioning() {
        return error(
            StatusCode::CONFLICT,
            "the pod is starting or shutting down; decommission it once it is ready",
        );
    }
    let mut since = app
        .decommissioned_since
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let now = SystemTime::now();
    let recorded = app.handoff.update(|l| match l {
        None => {
            let secs = now
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            *l = Some(Leaving::new(new_id(), secs, to.map(String::from)));
        }
        Some(l) if l.step == Step::Draining => {
            if let Some(to) = to {
                l.receiver = Some(to.to_string());
                l.refused = None;
            }
        }
        Some(_) => {}
    });
    let leaving = match recorded {
        Ok(l) => l,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot record the decommission: {e}"),
            )
        }
    };
    if let (Some(to), Some(l)) = (to, &leaving) {
        if l.receiver.as_deref() != Some(to) {
            return error(
                StatusCode::CONFLICT,
                format!(
                    "this pod already hands its data to {}; cancel first to choose another pod",
                    l.receiver.as_deref().unwrap_or("no pod")
                ),
            );
        }
    }
    if since.is_none() {
        *since = Some(now);
        app.ready.store(false, Ordering::Release);
        app.metrics.ready.set(0);
        app.scheduler.drain();
        tracing::info!(to, "decommissioning: writes refused, flushing the WAL");
    }
    drop(since);
    crate::handoff::send::start(app);
    (StatusCode::ACCEPTED, axum::Json(status(app))).into_response()
}

fn cancel(app: &Arc<App>) -> Response {
    let recorded = app.handoff.update(|l| {
        if let Some(l) = l {
            if l.step != Step::Draining || l.receiver.is_some() {
                l.step = Step::Cancelling;
            }
        }
    });
    match recorded {
        Ok(Some(l)) if l.step == Step::Cancelling => {
            // Handed tables must leave and the receiver settle first: the driver does it.
            crate::handoff::send::start(app);
            return (StatusCode::ACCEPTED, axum::Json(status(app))).into_response();
        }
        Ok(_) => {}
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot record the cancellation: {e}"),
            )
        }
    }
    if let Err(e) = app.handoff.update(|l| *l = None) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot record the cancellation: {e}"),
        );
    }
    resume_writes(app);
    (StatusCode::OK, axum::Json(status(app))).into_response()
}

/// Takes writes again (a cancelled decommission). A pod that had left the tenant's pods
/// (empty when the decommission was cancelled) joins them again first. Blocks.
pub(crate) fn resume_writes(app: &App) {
    let since = || {
        app.decommissioned_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    };
    // Not under the lock: `GET /decommission` reads it meanwhile.
    if since().is_some() {
        app.join_peers();
    }
    if since().take().is_some() && !app.draining.load(Ordering::Acquire) {
        app.scheduler.stop_draining();
        app.ready.store(true, Ordering::Release);
        app.metrics.ready.set(1);
        tracing::info!("taking writes again");
    }
}
