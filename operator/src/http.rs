//! `/metrics` and `/health` for the operator's own probes and scraper.
//!
//! `/health` answers 200 while the process runs: a standby replica waiting for the Lease is
//! healthy, and restarting it would not help anything.

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::metrics::Metrics;

async fn metrics(State(m): State<Metrics>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        m.render(),
    )
}

async fn health() -> &'static str {
    "ok\n"
}

pub fn router(m: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .with_state(m)
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    m: Metrics,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics and /health");
    axum::serve(listener, router(m))
        .with_graceful_shutdown(shutdown)
        .await
}
