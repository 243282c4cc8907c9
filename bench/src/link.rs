//! A slow network on one machine, for benchmarks: a PS service whose servers are reached only
//! through forwarding proxies that share a token-bucket limit per direction (a client
//! machine's full-duplex link). Used where a network namespace with `tc` is not available.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_client::{PsError, Result};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use angel_local_cluster::free_port;
use angel_ps_service::Functions;
use angel_ps_service::master::{MasterConfig, MasterNode};
use angel_ps_service::server::{ServerConfig, ServerNode};

/// Bytes that may pass at once before the rate applies (one 64 KiB chunk).
const BURST: f64 = 65_536.0;

/// A token bucket: `rate` bytes per second.
struct Bucket {
    rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    fn new(rate: f64) -> Self {
        Bucket {
            rate,
            state: Mutex::new((BURST, Instant::now())),
        }
    }

    /// Waits until `n` bytes may pass.
    async fn take(&self, n: usize) {
        let wait = {
            let mut s = self.state.lock();
            let now = Instant::now();
            s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate).min(BURST);
            s.1 = now;
            s.0 -= n as f64;
            (s.0 < 0.0).then(|| Duration::from_secs_f64(-s.0 / self.rate))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }
}

/// Copies `from` to `to` through `bucket` until either side closes.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    bucket: Arc<Bucket>,
) {
    let mut buf = vec![0u8; BURST as usize];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        bucket.take(n).await;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Accepts on `listener` and forwards every connection to `target`, each direction through
/// its shared bucket.
async fn forward(listener: TcpListener, target: SocketAddr, up: Arc<Bucket>, down: Arc<Bucket>) {
    while let Ok((client, _)) = listener.accept().await {
        let Ok(server) = TcpStream::connect(target).await else {
            continue;
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let (cr, cw) = client.into_split();
        let (sr, sw) = server.into_split();
        tokio::spawn(pump(cr, sw, up.clone()));
        tokio::spawn(pump(sr, cw, down.clone()));
    }
}

fn io(e: std::io::Error) -> PsError {
    PsError::Internal(format!("bench link proxy: {e}"))
}

/// A master and servers whose clients reach the servers through a `mbit` Mbit/s link.
pub struct SlowService {
    master: MasterNode,
    servers: Vec<ServerNode>,
    shutdown: CancellationToken,
    proxies: Vec<tokio::task::JoinHandle<()>>,
}

impl SlowService {
    /// Starts the master and `servers` servers on 127.0.0.1 behind the limited link.
    pub async fn start(servers: usize, mbit: f64) -> Result<Self> {
        let shutdown = CancellationToken::new();
        let localhost = SocketAddr::from(([127, 0, 0, 1], 0));
        let master = MasterNode::start(MasterConfig::new(localhost), shutdown.clone()).await?;
        let rate = mbit * 1e6 / 8.0;
        let (up, down) = (Arc::new(Bucket::new(rate)), Arc::new(Bucket::new(rate)));
        let mut service = SlowService {
            master,
            servers: Vec::new(),
            shutdown,
            proxies: Vec::new(),
        };
        for _ in 0..servers {
            let port = free_port().map_err(PsError::Internal)?;
            let target = SocketAddr::from(([127, 0, 0, 1], port));
            let listener = TcpListener::bind(localhost).await.map_err(io)?;
            let proxy = listener.local_addr().map_err(io)?;
            service.proxies.push(tokio::spawn(forward(
                listener,
                target,
                up.clone(),
                down.clone(),
            )));
            let config = ServerConfig {
                bind: target,
                advertise: Some(proxy.to_string()),
                ..ServerConfig::new(service.master.addr.to_string())
            };
            let server =
                ServerNode::start(config, Functions::default(), service.shutdown.clone()).await?;
            service.servers.push(server);
        }
        Ok(service)
    }

    /// The master's address (reached directly: only server traffic is limited).
    pub fn master_addr(&self) -> String {
        self.master.addr.to_string()
    }

    /// Stops servers, master and proxies.
    pub async fn shutdown(self) -> Result<()> {
        self.shutdown.cancel();
        for p in &self.proxies {
            p.abort();
        }
        for s in self.servers {
            s.wait().await?;
        }
        self.master.wait().await
    }
}
