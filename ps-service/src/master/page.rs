//! The master's status page over HTTP: `GET /` is one HTML file compiled into the binary
//! (no CDN: it works offline) that polls `GET /api/status` every second and draws servers,
//! matrices, counters, clients, workers, snapshots and each model's loss and AUC per epoch.

use std::sync::Arc;

use angel_proto::StatusRequest;
use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::response::{Html, Json};
use axum::routing::get;
use serde_json::Value;

use super::service::MasterService;
use super::status_json::status_json;
use crate::access::Access;

/// The page: HTML, CSS and script in one file.
const PAGE: &str = include_str!("page.html");

/// The routes of the page and its data.
pub fn router(service: Arc<MasterService>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/status", get(status))
        .with_state(service)
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// The status as the request's token may see it (a namespace token: its namespaces only).
async fn status(
    State(service): State<Arc<MasterService>>,
    access: Option<Extension<Access>>,
) -> Json<Value> {
    let request = StatusRequest {
        pulls: false,
        epochs: true,
        leases: true,
    };
    let mut status = service.status(request).await;
    if let Some(Extension(access)) = access {
        access.filter_status(&mut status);
    }
    Json(status_json(&status))
}
