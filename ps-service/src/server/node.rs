//! [`ServerNode`]: starts one parameter server: bind, register with the master, serve,
//! and heartbeat until shut down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use angel_proto::credential::AuthChannel;
use angel_proto::master_client::MasterClient;
use angel_proto::server_server::ServerServer;
use angel_proto::tls::{self, chain};
use angel_proto::{HeartbeatRequest, Incarnation, PsError, RegisterServerRequest, Result};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::limits::Limits;
use super::partition::Partitions;
use super::service::ServerService;
use crate::optim::OptimizerRegistry;
use crate::psf::PsfRegistry;
use crate::security::Security;
use crate::snapshot::SnapshotDir;
use crate::telemetry::{Telemetry, http};
use crate::{admin, net};

/// How to start a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Master address (`host:port`).
    pub master: String,
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Address clients should use, when it differs from the bound one (NAT, 0.0.0.0).
    pub advertise: Option<String>,
    /// Time between heartbeats.
    pub heartbeat: Duration,
    /// How long to keep trying to reach the master at start-up.
    pub register_timeout: Duration,
    /// The largest and longest request, and the bytes of partition data it may hold.
    pub limits: Limits,
    /// Wait empty for a dead server's partitions instead of taking new matrices' (`--standby`).
    pub standby: bool,
    /// Where to serve `/metrics` over HTTP (`--http`); none: no HTTP listener.
    pub http: Option<SocketAddr>,
    /// The process's metrics, shared with the master and servers of the same process.
    pub telemetry: Telemetry,
    /// Who may talk to it and over what (`--token-file`, `--namespace-tokens`, `--tls-*`);
    /// its token and CA are also what it calls the master with.
    pub security: Security,
}

impl ServerConfig {
    /// Defaults for a server of the master at `master`, on a free local port.
    pub fn new(master: impl Into<String>) -> Self {
        ServerConfig {
            master: master.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            advertise: None,
            heartbeat: Duration::from_secs(1),
            register_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            standby: false,
            http: None,
            telemetry: Telemetry::new(),
            security: Security::default(),
        }
    }
}

/// What a server runs on its data besides pull and push: PS functions and optimizers, the
/// built-ins plus any a user registered.
#[derive(Clone, Default)]
pub struct Functions {
    /// PS functions, by name.
    pub psfs: PsfRegistry,
    /// Optimizers, by name.
    pub optimizers: OptimizerRegistry,
}

/// A running server.
pub struct ServerNode {
    /// Id the master assigned.
    pub id: u32,
    /// Address clients reach it at.
    pub addr: String,
    /// The address of its HTTP listener, when it has one.
    pub http: Option<SocketAddr>,
    task: JoinHandle<Result<()>>,
}

impl ServerNode {
    /// Binds, registers with the master and serves until `shutdown` is cancelled.
    pub async fn start(
        config: ServerConfig,
        functions: Functions,
        shutdown: CancellationToken,
    ) -> Result<Self> {
        config.security.check(config.bind, "a server")?;
        let (listener, local) = net::bind(config.bind).await?;
        let addr = config
            .advertise
            .clone()
            .unwrap_or_else(|| local.to_string());
        let admin_token = admin::new_token();
        let register = RegisterServerRequest {
            addr: addr.clone(),
            optimizers: functions.optimizers.infos(),
            admin_token: admin_token.clone(),
            rejoin: false,
            previous_id: 0,
            standby: config.standby,
            incarnation: None,
        };
        // Never 0, which a master reads as "saved before nonces".
        let nonce = rand::random::<u64>().max(1);
        let parts = Arc::new(Partitions::default());
        let server_id = Arc::new(AtomicU32::new(u32::MAX));
        let service = Arc::new(ServerService {
            parts: parts.clone(),
            limits: config.limits,
            memory: super::memory::MemoryAccount::new(config.limits.memory_budget),
            server_id: server_id.clone(),
            ..ServerService::new(functions, admin_token, format!("server@{addr}"))
        });
        config.telemetry.watch(Arc::downgrade(&service) as _);
        let grpc = ServerServer::from_arc(service.clone())
            .max_decoding_message_size(net::decode_cap(config.limits.max_message_bytes))
            .max_encoding_message_size(usize::MAX);
        // Serve before registering: the master calls back to check the address answers.
        let serving = shutdown.child_token();
        let metrics = config.telemetry.rpc_layer(&service.node);
        let (auth, tls) = (config.security.auth_layer(), config.security.tls.as_ref());
        let router =
            net::grpc_server(config.limits.request_timeout, metrics, auth, tls)?.add_service(grpc);
        let (stop, label) = (serving.clone(), format!("server {addr}"));
        // Bound before registering: a server that cannot serve its metrics never joins.
        let http = match config.http {
            Some(at) => {
                let routes = http::metrics_router(config.telemetry.clone());
                let access = config.security.http_access();
                Some(http::serve(at, routes, access, serving.clone()).await?)
            }
            None => None,
        };
        let task = tokio::spawn(async move { net::serve(router, listener, stop, &label).await });
        let registering = std::time::Instant::now();
        let registered = match connect_master(&config).await {
            Ok(mut master) => master
                .register_server(RegisterServerRequest {
                    incarnation: Some(incarnation(nonce, &addr, &parts)),
                    ..register.clone()
                })
                .await
                .map(|reply| (master, reply.into_inner()))
                .map_err(|s| PsError::from_status(s, &format!("master {}", config.master))),
            Err(e) => Err(e),
        };
        let (master, reply) = match registered {
            Ok(registered) => registered,
            Err(e) => {
                serving.cancel();
                let _ = task.await;
                return Err(e);
            }
        };
        parts.observe_epoch(reply.epoch);
        service.memory.set_share(reply.namespace_memory_share);
        service
            .lease
            .set_length(Duration::from_millis(reply.lease_ms));
        service.lease.renew(registering);
        if !reply.snapshot_dir.is_empty() {
            *service.snapshot_dir.write() = Some(SnapshotDir::parse(&reply.snapshot_dir)?);
            let every = Duration::from_millis(reply.snapshot_interval_ms.max(100));
            tokio::spawn(snapshot_every(service.clone(), every, shutdown.clone()));
        }
        let id = reply.server_id;
        server_id.store(id, Ordering::Relaxed);
        let beat = Heartbeat {
            master,
            server_id,
            service,
            register,
            nonce,
            doubted: String::new(),
        };
        tokio::spawn(beat.run(config.heartbeat, shutdown.clone()));
        tracing::info!(id, %addr, ?http, "server started");
        Ok(ServerNode {
            id,
            addr,
            http,
            task,
        })
    }

    /// Waits until the server has shut down.
    pub async fn wait(self) -> Result<()> {
        self.task
            .await
            .map_err(|e| PsError::Internal(format!("server task failed: {e}")))?
    }
}

async fn connect_master(config: &ServerConfig) -> Result<MasterClient<AuthChannel>> {
    let trust = config.security.trust();
    let deadline = tokio::time::Instant::now() + config.register_timeout;
    let credential = config.security.credential();
    loop {
        match tls::endpoint(&config.master, trust)
            .map_err(|e| PsError::InvalidArgument(format!("--master: {e}")))?
            .connect()
            .await
        {
            Ok(channel) => return Ok(MasterClient::with_interceptor(channel, credential)),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(PsError::Unavailable(format!(
                    "master {} is unreachable after {:?}: {}",
                    config.master,
                    config.register_timeout,
                    chain(&e)
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Writes the partitions that changed every `every`, until shut down.
async fn snapshot_every(service: Arc<ServerService>, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let writer = service.clone();
        let written = tokio::task::spawn_blocking(move || writer.write_snapshots(&[])).await;
        let failure = match written {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("snapshot failed (retried every interval): {e}")),
            Err(e) => Some(format!(
                "snapshot task failed (retried every interval): {e}"
            )),
        };
        if let Some(why) = &failure {
            tracing::warn!("{why}");
        }
        *service.snapshot_error.lock() = failure;
    }
}

/// What a server's heartbeat needs: the master, its id (which changes if it registers again),
/// what it registers with, and its process's nonce.
struct Heartbeat {
    master: MasterClient<AuthChannel>,
    server_id: Arc<AtomicU32>,
    service: Arc<ServerService>,
    register: RegisterServerRequest,
    nonce: u64,
    /// What the master last said when it did not know this server (logged once).
    doubted: String,
}

/// Who this server process is and what it holds, as heartbeats and registrations tell it.
fn incarnation(nonce: u64, addr: &str, parts: &Partitions) -> Incarnation {
    Incarnation {
        nonce,
        seen_epoch: parts.seen_epoch(),
        held: parts.held(),
        addr: addr.to_string(),
    }
}

impl Heartbeat {
    /// Heartbeats every `every` until shut down. A restarted master asks the server to
    /// register again under its id, keeping its partitions. A master that answers NOT_FOUND
    /// declared this server dead and restored its partitions elsewhere (or holds nothing of
    /// it): the server drops its copies (clients with an old map must not change them) and
    /// registers as a new server. A master that does not know a server holding partitions
    /// says so, and the server keeps them (`angel_ps_service::master::membership`).
    async fn run(mut self, every: Duration, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let server_id = self.server_id.load(Ordering::Relaxed);
            let request = HeartbeatRequest {
                server_id,
                incarnation: Some(self.incarnation()),
            };
            let sent = std::time::Instant::now();
            match self.master.heartbeat(request).await {
                Ok(reply) if !reply.get_ref().unknown.is_empty() => {
                    // A master that does not know this server moves none of its partitions.
                    self.service.lease.renew(sent);
                    let why = reply.into_inner().unknown;
                    if why != self.doubted {
                        tracing::error!(
                            server_id,
                            "the master does not know this server's partitions; keeping them \
                             until an operator restarts the master with its state or with \
                             --start-empty: {why}"
                        );
                        self.doubted = why;
                    }
                }
                Ok(reply) if reply.get_ref().rejoin => self.register(Some(server_id)).await,
                Ok(reply) => {
                    self.service.lease.renew(sent);
                    self.service.parts.observe_epoch(reply.into_inner().epoch);
                }
                Err(status) if status.code() == tonic::Code::NotFound => {
                    tracing::warn!(
                        server_id,
                        "the master declared this server dead; dropping its partitions and \
                         registering again"
                    );
                    self.service.parts.clear();
                    self.register(None).await;
                }
                Err(status) => tracing::warn!(server_id, %status, "heartbeat to master failed"),
            }
        }
    }

    /// Registers again: under `previous` id keeping the partitions, or (None, or when the
    /// master no longer awaits that id) as a new, empty server.
    async fn register(&mut self, previous: Option<u32>) {
        let request = RegisterServerRequest {
            rejoin: previous.is_some(),
            previous_id: previous.unwrap_or_default(),
            incarnation: Some(self.incarnation()),
            ..self.register.clone()
        };
        let sent = std::time::Instant::now();
        match self.master.register_server(request).await {
            Ok(reply) => {
                let reply = reply.into_inner();
                let lease = &self.service.lease;
                lease.set_length(Duration::from_millis(reply.lease_ms));
                lease.renew(sent);
                self.service.parts.observe_epoch(reply.epoch);
                (self.service.memory).set_share(reply.namespace_memory_share);
                self.server_id.store(reply.server_id, Ordering::Relaxed);
                tracing::info!(id = reply.server_id, "server registered again");
            }
            Err(status) if previous.is_some() && status.code() == tonic::Code::NotFound => {
                self.service.parts.clear();
                Box::pin(self.register(None)).await;
            }
            Err(status) => tracing::warn!(%status, "registering again failed; retrying"),
        }
    }

    fn incarnation(&self) -> Incarnation {
        incarnation(self.nonce, &self.register.addr, &self.service.parts)
    }
}
