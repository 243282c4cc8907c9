//! `angel-ps master`, `server` and `standalone`. Each prints one line with its address on
//! stdout once it is ready (scripts and tests wait for it), then runs until Ctrl-C / SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use angel_client::{PsError, Result};
use clap::Args;
use tokio_util::sync::CancellationToken;

use angel_ps_service::Functions;
use angel_ps_service::master::quota::Quotas;
use angel_ps_service::master::{MasterConfig, MasterNode, Snapshots};
use angel_ps_service::net;
use angel_ps_service::security::Security;
use angel_ps_service::server::{Limits, ServerConfig, ServerNode, default_memory_budget};
use angel_ps_service::snapshot::SnapshotDir;
use angel_ps_service::standalone::{Standalone, StandaloneConfig};

use crate::access::NodeAccess;

/// Flags of `angel-ps master`.
#[derive(Debug, Args)]
pub struct MasterArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "ANGEL_MASTER_BIND", default_value = "127.0.0.1:7077")]
    pub bind: SocketAddr,
    /// Blocks per server the default range partitioner aims for.
    #[arg(long, env = "ANGEL_PARTS_PER_SERVER", default_value_t = 4)]
    pub parts_per_server: u64,
    /// Seconds without a heartbeat after which a server takes no new partitions and, with
    /// --snapshot-dir, is declared dead and its partitions are restored on the others from
    /// their snapshots (clients' reports are acted on sooner).
    #[arg(long, env = "ANGEL_SERVER_TIMEOUT_SECS", default_value_t = 10)]
    pub server_timeout_secs: u64,
    /// The service token and TLS.
    #[command(flatten)]
    pub access: NodeAccess,
    /// Serve the status page and Prometheus `/metrics` over HTTP on this address (port 0
    /// picks a free port); off unless given.
    #[arg(long, env = "ANGEL_MASTER_HTTP", value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
    /// Start empty: ignore the state saved in --snapshot-dir, and have servers that hold
    /// partitions this master does not know drop them. Without it, a master whose servers
    /// hold data its state does not know (started without its state, or with an older one)
    /// refuses every change until restarted with its state.
    #[arg(long, env = "ANGEL_START_EMPTY")]
    pub start_empty: bool,
    /// Matrices and counters the names of one namespace (`NAMESPACE/name`) may hold together;
    /// names without a namespace have no quota.
    #[arg(long, env = "ANGEL_NAMESPACE_MAX_OBJECTS", default_value_t = Quotas::default().objects)]
    pub namespace_max_objects: usize,
    /// Bytes of dense matrices one namespace may hold together. Default: 40% of this
    /// machine's memory (half a server's default budget).
    #[arg(long, env = "ANGEL_NAMESPACE_MEMORY")]
    pub namespace_memory: Option<u64>,
    /// Active training workers the models of one namespace may have together.
    #[arg(long, env = "ANGEL_NAMESPACE_MAX_WORKERS", default_value_t = Quotas::default().workers)]
    pub namespace_max_workers: usize,
    /// The fraction of each server's --memory-budget one namespace's data (dense and sparse
    /// matrices, counters, optimizer state) may take on that server, in (0, 1].
    #[arg(long, env = "ANGEL_NAMESPACE_MEMORY_SHARE", value_parser = parse_share,
          default_value_t = Quotas::default().memory_share)]
    pub namespace_memory_share: f64,
}

/// Where and how often servers snapshot their partitions (`master` and `standalone`).
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Directory the servers write their partitions' snapshots to: a path, or a file://,
    /// s3:// or hdfs:// URL. Without it nothing is written, and a server's partitions are
    /// lost with it.
    #[arg(long, env = "ANGEL_SNAPSHOT_DIR")]
    pub snapshot_dir: Option<String>,
    /// Seconds between snapshots of the partitions that changed.
    #[arg(long, env = "ANGEL_SNAPSHOT_INTERVAL_SECS", default_value_t = 10.0)]
    pub snapshot_interval_secs: f64,
}

impl SnapshotArgs {
    /// The master's snapshot settings; a bad URL or interval names its flag.
    fn settings(&self) -> Result<Snapshots> {
        let secs = self.snapshot_interval_secs;
        if !(0.1..=86_400.0).contains(&secs) {
            return Err(PsError::InvalidArgument(format!(
                "--snapshot-interval-secs {secs}: give 0.1 to 86400 seconds"
            )));
        }
        Ok(Snapshots {
            dir: self
                .snapshot_dir
                .as_deref()
                .map(SnapshotDir::parse)
                .transpose()?,
            interval: Duration::from_secs_f64(secs),
        })
    }
}

/// Flags of `angel-ps server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Master address (host:port).
    #[arg(long, env = "ANGEL_MASTER")]
    pub master: String,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "ANGEL_SERVER_BIND", default_value = "127.0.0.1:0")]
    pub bind: SocketAddr,
    /// Address clients should use when it differs from --bind (for example with 0.0.0.0).
    #[arg(long, env = "ANGEL_ADVERTISE")]
    pub advertise: Option<String>,
    /// Milliseconds between heartbeats to the master.
    #[arg(long, env = "ANGEL_HEARTBEAT_MS", default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// The request and memory limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Wait, empty, to take the place of a server that dies (its partitions are restored
    /// here from their snapshots) instead of taking partitions of new matrices.
    #[arg(long, env = "ANGEL_STANDBY")]
    pub standby: bool,
    /// The service token and TLS.
    #[command(flatten)]
    pub access: NodeAccess,
    /// Serve Prometheus `/metrics` over HTTP on this address (port 0 picks a free port); off
    /// unless given.
    #[arg(long, env = "ANGEL_SERVER_HTTP", value_name = "ADDR")]
    pub http: Option<SocketAddr>,
}

/// Flags of `angel-ps standalone`.
#[derive(Debug, Args)]
pub struct StandaloneArgs {
    /// Number of servers to run beside the master.
    #[arg(long, env = "ANGEL_SERVERS", default_value_t = 2)]
    pub servers: usize,
    /// Master address to listen on (port 0 picks a free port); servers take free ports.
    #[arg(long, env = "ANGEL_MASTER_BIND", default_value = "127.0.0.1:7077")]
    pub bind: SocketAddr,
    /// The servers' request and memory limits (the memory budget is shared equally).
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The service token and TLS.
    #[command(flatten)]
    pub access: NodeAccess,
    /// Serve the status page and Prometheus `/metrics` (of the master and every
    /// server) over HTTP on this address (port 0 picks a free port); off unless given.
    #[arg(long, env = "ANGEL_MASTER_HTTP", value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
}

/// Flags of the servers' [`Limits`], for `angel-ps server` and `standalone`.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Largest request a server accepts, in bytes; larger ones get RESOURCE_EXHAUSTED.
    #[arg(long, env = "ANGEL_MAX_MESSAGE_BYTES", default_value_t = net::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Seconds a request may take, body included; a stalled upload is cut off after it.
    #[arg(long, env = "ANGEL_REQUEST_TIMEOUT_SECS", default_value_t = net::DEFAULT_REQUEST_TIMEOUT.as_secs())]
    pub request_timeout_secs: u64,
    /// Bytes of partition data the servers may hold (standalone's servers together, shared
    /// equally); creating dense partitions past it gets RESOURCE_EXHAUSTED. Default: 80% of
    /// the machine's memory.
    #[arg(long, env = "ANGEL_MEMORY_BUDGET")]
    pub memory_budget: Option<u64>,
}

impl From<&LimitArgs> for Limits {
    fn from(flags: &LimitArgs) -> Self {
        Limits {
            max_message_bytes: flags.max_message_bytes,
            request_timeout: Duration::from_secs(flags.request_timeout_secs.max(1)),
            memory_budget: flags.memory_budget.unwrap_or_else(default_memory_budget),
        }
    }
}

/// A fraction in (0, 1], for `--namespace-memory-share`.
fn parse_share(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err(format!("'{text}' is not a fraction in (0, 1], such as 0.5")),
    }
}

/// Runs the master until a signal.
pub async fn master(args: MasterArgs) -> Result<()> {
    let shutdown = CancellationToken::new();
    net::cancel_on_signal(shutdown.clone());
    let config = MasterConfig {
        parts_per_server: args.parts_per_server,
        server_timeout: Duration::from_secs(args.server_timeout_secs.max(1)),
        snapshots: args.snapshots.settings()?,
        http: args.http,
        security: Security::try_from(&args.access)?,
        start_empty: args.start_empty,
        quotas: Quotas {
            objects: args.namespace_max_objects,
            dense_bytes: args
                .namespace_memory
                .unwrap_or_else(|| Quotas::default().dense_bytes),
            workers: args.namespace_max_workers,
            memory_share: args.namespace_memory_share,
        },
        ..MasterConfig::new(args.bind)
    };
    let node = MasterNode::start(config, shutdown).await?;
    println!("angel-ps master listening on {}", node.addr);
    print_http("master", node.http);
    node.wait().await
}

/// Runs one server until a signal.
pub async fn server(args: ServerArgs) -> Result<()> {
    let shutdown = CancellationToken::new();
    net::cancel_on_signal(shutdown.clone());
    let config = ServerConfig {
        bind: args.bind,
        advertise: args.advertise,
        heartbeat: Duration::from_millis(args.heartbeat_ms.max(1)),
        limits: Limits::from(&args.limits),
        standby: args.standby,
        http: args.http,
        security: Security::try_from(&args.access)?,
        ..ServerConfig::new(args.master)
    };
    let node = ServerNode::start(config, Functions::default(), shutdown).await?;
    println!("angel-ps server {} listening on {}", node.id, node.addr);
    print_http("server", node.http);
    node.wait().await
}

/// Runs master and servers in this process until a signal.
pub async fn standalone(args: StandaloneArgs) -> Result<()> {
    let config = StandaloneConfig {
        bind: args.bind,
        limits: Limits::from(&args.limits),
        snapshots: args.snapshots.settings()?,
        http: args.http,
        security: Security::try_from(&args.access)?,
        ..StandaloneConfig::new(args.servers)
    };
    let service = Standalone::start(config).await?;
    net::cancel_on_signal(service.shutdown_token());
    println!("angel-ps master listening on {}", service.master_addr());
    print_http("standalone", service.http_addr());
    service.wait().await?;
    eprintln!("angel-ps standalone stopped");
    Ok(())
}

/// Prints the second line of a node with `--http`: where its page and metrics are.
pub fn print_http(who: &str, http: Option<SocketAddr>) {
    if let Some(addr) = http {
        println!("angel-ps {who} serving HTTP on http://{addr}/");
    }
}
