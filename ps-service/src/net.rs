//! Network plumbing shared by the master and the servers: listeners, tonic settings,
//! and shutdown on Ctrl-C / SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use angel_proto::limits::{MAX_FRAME, WINDOW};
use angel_proto::tls::{NodeTls, chain};
use angel_proto::{PsError, Result};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_layer::{Identity, Stack};

use crate::auth::AuthLayer;
use crate::gate::{GRPC_CONNECTIONS, Gate};
use crate::request_activity::ActivityLayer;
use crate::telemetry::RpcMetricsLayer;

/// The layers around a node's services: each request recorded on its connection (so a full
/// gate closes idle connections only), metrics (refused requests count too), then the token
/// check.
type Layers = Stack<AuthLayer, Stack<RpcMetricsLayer, Stack<ActivityLayer, Identity>>>;
/// A node's gRPC server: tonic's, with every RPC counted for `/metrics` and its token checked.
pub type GrpcServer = tonic::transport::Server<Layers>;
/// [`GrpcServer`] with its services added.
pub type GrpcRouter = tonic::transport::server::Router<Layers>;

/// Default request size limit of a server, in bytes (see `server::Limits`).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 256 << 20;

/// tonic's hard cap on a decoded request for a node whose limit is `limit`. Requests between
/// the two get our RESOURCE_EXHAUSTED with a clear message; the cap only bounds memory.
pub fn decode_cap(limit: usize) -> usize {
    limit.saturating_add(64 << 20)
}

/// Binds `addr` (port 0 picks a free port) for `what` (named in errors) and returns the
/// listener with its real address.
pub async fn listen(addr: SocketAddr, what: &str) -> Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| PsError::Unavailable(format!("cannot listen for {what} on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| PsError::Internal(format!("{what} listener on {addr} has no address: {e}")))?;
    Ok((listener, local))
}

/// Binds `addr` for gRPC (see [`listen`]).
pub async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr)> {
    listen(addr, "gRPC").await
}

/// Default time a request may take from its first byte to its answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest header block of a request, in bytes: metadata is names and tokens, never data.
const MAX_HEADERS: u32 = 16 << 10;
/// Streams one connection may have open at once.
const MAX_STREAMS: u32 = 256;
/// Pings on idle connections, and how long an unanswered ping may wait before the connection
/// is closed: a peer that vanished without closing frees what it held.
const KEEPALIVE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(20));

/// A tonic server tuned for bulk transfers (large HTTP/2 windows and frames). A request
/// whose body stalls is cancelled after `request_timeout` (DEADLINE_EXCEEDED), releasing its
/// buffers: the body is read inside the timed handler. `metrics` counts its RPCs and `auth`
/// checks their token; with `tls` it serves TLS only.
pub fn grpc_server(
    request_timeout: Duration,
    metrics: RpcMetricsLayer,
    auth: AuthLayer,
    tls: Option<&NodeTls>,
) -> Result<GrpcServer> {
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls.server_config()).map_err(|e| {
            PsError::InvalidArgument(format!("--tls-cert / --tls-key ({tls:?}): {}", chain(&e)))
        })?;
    }
    Ok(builder
        .initial_stream_window_size(WINDOW)
        .initial_connection_window_size(WINDOW)
        .max_frame_size(Some(MAX_FRAME))
        .timeout(request_timeout)
        .max_concurrent_streams(Some(MAX_STREAMS))
        .http2_keepalive_interval(Some(KEEPALIVE.0))
        .http2_keepalive_timeout(Some(KEEPALIVE.1))
        .http2_max_header_list_size(Some(MAX_HEADERS))
        .layer(ActivityLayer)
        .layer(metrics)
        .layer(auth))
}

/// Cancels `token` on Ctrl-C or SIGTERM.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler installs");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        token.cancel();
    });
}

/// How long a stopping node waits for in-flight requests before closing connections.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves `router` on `listener`'s connections, through a [`Gate`] of [`GRPC_CONNECTIONS`],
/// until `shutdown` is cancelled, then allows in-flight requests [`SHUTDOWN_GRACE`] to
/// finish; idle client connections do not hold it open.
pub async fn serve(
    router: GrpcRouter,
    listener: TcpListener,
    shutdown: CancellationToken,
    who: &str,
) -> Result<()> {
    let incoming = Gate::new(GRPC_CONNECTIONS).incoming(listener);
    let server = router.serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned());
    let deadline = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        result = server => result.map_err(|e| PsError::Internal(format!("{who} stopped: {e}"))),
        () = deadline => Ok(()),
    }
}
