//! [`Standalone`]: a master and N servers in one process, on real sockets on 127.0.0.1.
//! The embedded default for jobs, demos, benchmarks and tests of custom PS functions.

use std::net::SocketAddr;
use std::sync::Arc;

use angel_proto::Result;
use tokio_util::sync::CancellationToken;

use crate::master::{MasterConfig, MasterNode, Partitioner, Snapshots};
use crate::security::Security;
use crate::server::{Functions, Limits, ServerConfig, ServerNode};

/// What to start.
#[derive(Clone)]
pub struct StandaloneConfig {
    /// Master listen address; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Number of servers (each on a free port of the master's host).
    pub servers: usize,
    /// Each server's request limits, and the bytes of partition data all servers together
    /// may hold, shared equally.
    pub limits: Limits,
    /// PS functions and optimizers the servers run.
    pub functions: Functions,
    /// Partitioners the master offers besides "range".
    pub partitioners: Vec<Arc<dyn Partitioner>>,
    /// Where and how often servers snapshot their partitions (no directory: no snapshots).
    pub snapshots: Snapshots,
    /// Where the master serves `/metrics` (covering every server) over HTTP; none: no HTTP.
    pub http: Option<SocketAddr>,
    /// Who may talk to the master and every server, and over what (one TLS certificate
    /// naming the master's host).
    pub security: Security,
}

impl StandaloneConfig {
    /// `servers` servers with the built-in PS functions, master on a free local port.
    pub fn new(servers: usize) -> Self {
        StandaloneConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            servers,
            limits: Limits::default(),
            functions: Functions::default(),
            partitioners: Vec::new(),
            snapshots: Snapshots::default(),
            http: None,
            security: Security::default(),
        }
    }
}

/// A running in-process service.
pub struct Standalone {
    master: MasterNode,
    servers: Vec<ServerNode>,
    shutdown: CancellationToken,
}

impl Standalone {
    /// Starts the master, then the servers, and returns once all servers have registered.
    pub async fn start(config: StandaloneConfig) -> Result<Self> {
        let shutdown = CancellationToken::new();
        let master_config = MasterConfig {
            partitioners: config.partitioners.clone(),
            snapshots: config.snapshots.clone(),
            http: config.http,
            security: config.security.clone(),
            ..MasterConfig::new(config.bind)
        };
        let telemetry = master_config.telemetry.clone();
        let master = MasterNode::start(master_config, shutdown.clone()).await?;
        let mut servers = Vec::with_capacity(config.servers);
        for _ in 0..config.servers {
            let server_config = ServerConfig {
                bind: SocketAddr::new(master.addr.ip(), 0),
                limits: config.limits.shared_by(config.servers),
                telemetry: telemetry.clone(),
                security: config.security.clone(),
                ..ServerConfig::new(master.addr.to_string())
            };
            servers.push(
                ServerNode::start(server_config, config.functions.clone(), shutdown.clone())
                    .await?,
            );
        }
        Ok(Standalone {
            master,
            servers,
            shutdown,
        })
    }

    /// The master address clients connect to.
    pub fn master_addr(&self) -> String {
        self.master.addr.to_string()
    }

    /// Where the master serves `/metrics`, when asked to.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.master.http
    }

    /// A token that stops everything when cancelled (for signal handlers).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until the service stops (its shutdown token is cancelled).
    pub async fn wait(self) -> Result<()> {
        for server in self.servers {
            server.wait().await?;
        }
        self.master.wait().await
    }

    /// Stops the master and servers and waits for them.
    pub async fn shutdown(self) -> Result<()> {
        self.shutdown.cancel();
        self.wait().await
    }
}
