//! The `--http` listener: plain HTTP/1.1 beside a node's gRPC port, serving `/metrics` and
//! the routes its node adds (the master's status page).

use std::net::SocketAddr;

use angel_proto::Result;
use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE as PROMETHEUS_TEXT;
use tokio_util::sync::CancellationToken;

use super::Telemetry;

/// A router answering `GET /metrics` with `telemetry`'s exposition.
pub fn metrics_router(telemetry: Telemetry) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(telemetry)
}

async fn metrics(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    ([(CONTENT_TYPE, PROMETHEUS_TEXT)], telemetry.encode())
}

/// Binds `addr` (port 0 picks a free port) and serves `router` until `shutdown` is
/// cancelled; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let (listener, local) = crate::net::listen(addr, "HTTP").await?;
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::warn!(%local, "HTTP listener stopped: {e}");
        }
    });
    Ok(local)
}
