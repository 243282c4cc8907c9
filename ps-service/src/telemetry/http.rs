//! The `--http` listener: plain HTTP/1.1 beside a node's gRPC port, serving `/metrics` and
//! the routes its node adds (the master's status page).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use angel_proto::Result;
use angel_proto::credential::{HEADER, Token};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE as PROMETHEUS_TEXT;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::Telemetry;
use crate::access::{Access, NamespaceTokens};
use crate::gate::{Gate, HTTP_CONNECTIONS};

/// A router answering `GET /metrics` with `telemetry`'s exposition.
pub fn metrics_router(telemetry: Telemetry) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(telemetry)
}

async fn metrics(State(telemetry): State<Telemetry>) -> impl IntoResponse {
    ([(CONTENT_TYPE, PROMETHEUS_TEXT)], telemetry.encode())
}

/// Who may read a node's HTTP routes: the same tokens as its gRPC port.
#[derive(Debug, Clone, Default)]
pub struct HttpAccess {
    /// The service token; none: anyone, and only a loopback address may be served.
    pub token: Option<Token>,
    /// Tokens limited to namespaces: they read the status of theirs, not `/metrics`.
    pub scoped: NamespaceTokens,
}

/// Binds `addr` (port 0 picks a free port) and serves `router` until `shutdown` is
/// cancelled; returns the bound address. With a service token every route but the page
/// itself (`GET /`, static HTML that asks for a token) needs `Authorization: Bearer TOKEN`,
/// which puts the token's [`Access`] on the request; a limited token may not read `/metrics`
/// (it covers every namespace). Without one, only a loopback address is served.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    access: HttpAccess,
    shutdown: CancellationToken,
) -> Result<SocketAddr> {
    let what = "the HTTP listener (status page and /metrics)";
    crate::auth::require_token(addr, access.token.as_ref(), true, what)?;
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "serving {what} on {addr} over plain HTTP: its token and the status cross the \
             network in clear text"
        );
    }
    let router = match access.token.clone() {
        None => router,
        Some(token) => {
            let keys = Arc::new((token, access.scoped));
            router.layer(axum::middleware::from_fn(move |request, next| {
                guard(keys.clone(), request, next)
            }))
        }
    };
    let (listener, local) = crate::net::listen(addr, "HTTP").await?;
    tokio::spawn(accept(listener, router, shutdown));
    Ok(local)
}

/// How long a client may take to send a request's headers: hyper's check, which a slow
/// sender (slowloris) would otherwise hold a connection open past.
const HEADER_TIME: Duration = Duration::from_secs(10);

/// Serves each connection of `listener` (through a [`Gate`] of [`HTTP_CONNECTIONS`]) on a
/// task of its own until `shutdown`, when open connections finish the request in hand.
async fn accept(listener: TcpListener, router: Router, shutdown: CancellationToken) {
    let gate = Gate::new(HTTP_CONNECTIONS);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIME);
    loop {
        let connection = tokio::select! {
            connection = gate.accept(&listener) => connection,
            () = shutdown.cancelled() => return,
        };
        let (router, activity) = (router.clone(), connection.activity());
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let in_hand = activity.request();
            let answer = router.clone().call(request);
            async move {
                let answer = answer.await;
                drop(in_hand);
                answer
            }
        });
        let served = http.serve_connection(TokioIo::new(connection), service);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::pin!(served);
            let ended = tokio::select! {
                ended = served.as_mut() => ended,
                () = shutdown.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    served.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!("HTTP connection closed: {e}");
            }
        });
    }
}

/// Lets a request with the service token or a namespace token through (with its [`Access`]);
/// `GET /` needs none.
async fn guard(keys: Arc<(Token, NamespaceTokens)>, mut request: Request, next: Next) -> Response {
    if request.uri().path() == "/" {
        return next.run(request).await;
    }
    let sent = request.headers().get(HEADER).map(|v| v.as_bytes());
    let access = sent.and_then(|sent| match keys.0.accepts(sent) {
        true => Some(Access::All),
        false => keys.1.find(sent),
    });
    match access {
        Some(Access::All) => {}
        Some(_) if request.uri().path() == "/metrics" => {
            let why = "/metrics covers every namespace: scrape it with the service token";
            return (StatusCode::FORBIDDEN, why).into_response();
        }
        Some(_) => {}
        None => {
            let why = "this service requires a token: send 'Authorization: Bearer TOKEN' (the \
                       service token, or a namespace token for the status of its namespaces; \
                       Prometheus: authorization.credentials_file)";
            return (
                StatusCode::UNAUTHORIZED,
                [(WWW_AUTHENTICATE, "Bearer")],
                why,
            )
                .into_response();
        }
    }
    if let Some(access) = access {
        request.extensions_mut().insert(access);
    }
    next.run(request).await
}
