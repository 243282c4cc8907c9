//! [`MasterNode`]: binds and serves the master until shut down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use angel_proto::master_server::MasterServer;
use angel_proto::{PsError, Result};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::quota::Quotas;
use super::service::{MasterService, Snapshots};
use super::{Partitioner, RangePartitioner};
use crate::net;
use crate::security::Security;
use crate::telemetry::{Telemetry, http};

/// Largest request the master decodes: its requests carry names, shapes and attributes
/// (bounded far below this), never data.
const MAX_MASTER_REQUEST: usize = 4 << 20;

/// Longest a master request may take. Generous: a timeout drops the handler, and a matrix
/// creation cut off between servers would leave partitions behind; the master's requests are
/// small (see [`MAX_MASTER_REQUEST`]), so a stalled one holds little.
const MASTER_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// How to start a master.
#[derive(Clone)]
pub struct MasterConfig {
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Blocks per server the default partitioner aims for.
    pub parts_per_server: u64,
    /// Partitioners besides "range", selectable by name in create requests.
    pub partitioners: Vec<Arc<dyn Partitioner>>,
    /// A server silent (no heartbeat) this long is declared dead and its partitions are
    /// restored on the others.
    pub server_timeout: Duration,
    /// Where and how often servers snapshot their partitions (`--snapshot-dir`,
    /// `--snapshot-interval`).
    pub snapshots: Snapshots,
    /// Where to serve the status page and `/metrics` over HTTP (`--http`); none: no HTTP
    /// listener.
    pub http: Option<SocketAddr>,
    /// The process's metrics, shared with servers started in the same process.
    pub telemetry: Telemetry,
    /// Who may talk to it and over what: the service token, namespace tokens and TLS.
    pub security: Security,
    /// Ignore a saved state and have servers holding partitions drop them (`--start-empty`);
    /// without it, a master that finds its servers hold data it does not know refuses changes
    /// ([`super::membership`]).
    pub start_empty: bool,
    /// What the names of one namespace may hold together (`--namespace-max-objects`,
    /// `--namespace-memory`, `--namespace-max-workers`).
    pub quotas: Quotas,
}

impl MasterConfig {
    /// Defaults, listening on `bind`.
    pub fn new(bind: SocketAddr) -> Self {
        MasterConfig {
            bind,
            parts_per_server: 4,
            partitioners: Vec::new(),
            server_timeout: Duration::from_secs(10),
            snapshots: Snapshots::default(),
            http: None,
            telemetry: Telemetry::new(),
            security: Security::default(),
            start_empty: false,
            quotas: Quotas::default(),
        }
    }
}

/// Recovers servers silent past `timeout`, checking four times per timeout. A check that
/// comes half a timeout late means the master itself did not run (frozen, starved, its
/// machine suspended): the servers' silence meanwhile was its own, so they get a fresh grace
/// period first.
async fn watch_heartbeats(
    service: Arc<MasterService>,
    timeout: Duration,
    shutdown: CancellationToken,
) {
    let period = (timeout / 4).max(Duration::from_millis(50));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                let gap = last.elapsed();
                if gap > period + timeout / 2 {
                    service.grace_after_pause(gap);
                }
                service.check_heartbeats().await;
                last = std::time::Instant::now();
            }
        }
    }
}

/// A running master.
pub struct MasterNode {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The address of its HTTP listener, when it has one.
    pub http: Option<SocketAddr>,
    task: JoinHandle<Result<()>>,
}

impl MasterNode {
    /// Binds and serves until `shutdown` is cancelled.
    pub async fn start(config: MasterConfig, shutdown: CancellationToken) -> Result<Self> {
        let security = &config.security;
        security.check(config.bind, "the master")?;
        // Checked before binding: a bad certificate or key stops the start with its files named.
        let mut grpc = net::grpc_server(
            MASTER_REQUEST_TIMEOUT,
            config.telemetry.rpc_layer("master"),
            security.auth_layer(),
            security.tls.as_ref(),
        )?;
        let (listener, addr) = net::bind(config.bind).await?;
        let mut partitioners: Vec<Arc<dyn Partitioner>> = vec![Arc::new(RangePartitioner {
            parts_per_server: config.parts_per_server,
        })];
        partitioners.extend(config.partitioners);
        let service = Arc::new(MasterService::new(
            partitioners,
            config.server_timeout,
            config.snapshots,
            security.credential(),
            security.trust().cloned(),
            config.start_empty,
            config.quotas,
        ));
        service.resume()?;
        let http = match config.http {
            Some(at) => {
                let routes = http::metrics_router(config.telemetry.clone())
                    .merge(super::page::router(service.clone()));
                let access = config.security.http_access();
                Some(http::serve(at, routes, access, shutdown.clone()).await?)
            }
            None => None,
        };
        config.telemetry.watch(Arc::downgrade(&service) as _);
        tokio::spawn(watch_heartbeats(
            service.clone(),
            config.server_timeout,
            shutdown.clone(),
        ));
        let service = MasterServer::from_arc(service)
            .max_decoding_message_size(MAX_MASTER_REQUEST)
            .max_encoding_message_size(usize::MAX);
        let router = grpc.add_service(service);
        let task =
            tokio::spawn(async move { net::serve(router, listener, shutdown, "master").await });
        tracing::info!(%addr, ?http, "master started");
        Ok(MasterNode { addr, http, task })
    }

    /// Waits until the master has shut down.
    pub async fn wait(self) -> Result<()> {
        self.task
            .await
            .map_err(|e| PsError::Internal(format!("master task failed: {e}")))?
    }
}
