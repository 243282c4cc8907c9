//! [`PsClient`]: the whole client API, shared by every task of a process, one concern a file.
//!
//! A call resolves the matrix from the cached partition map, splits its keys or rows by
//! partition, sends one request per server concurrently and reassembles the answers in request
//! order. When a server answers that the map moved (FAILED_PRECONDITION), the client refreshes
//! the map and resends only what that server refused; when a server does not answer at all,
//! the client reports it to the master, which restores its partitions elsewhere, and resends
//! there. Servers apply each (writer, seq) once per partition, so no update is applied twice.
//!
//! - [`config`]: [`ClientConfig`] and the endpoint connections are made with;
//! - [`admin`]: calls to the master (matrices, optimizers, status, clocks);
//! - [`data`]: the data verbs (pull, push, PS functions);
//! - [`scatter`]: routing a call's slices to the servers and retrying what failed;
//! - [`recovery`]: new partition maps and the replay of changes to restored partitions;
//! - counters are [`crate::counter`]'s.

pub mod admin;
pub mod config;
pub mod data;
pub mod recovery;
pub mod scatter;

pub use admin::MASTER_WAIT;
pub use config::{ClientConfig, REPLAY_MB_VAR, worker_pid};
pub use scatter::RECOVERY_WAIT;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use angel_proto::credential::AuthChannel;
use angel_proto::master_client::MasterClient;
use angel_proto::{Result, namespace};
use parking_lot::RwLock;

use crate::replay::ReplayBuffer;
use crate::routes::Routing;
use config::{endpoint, unreachable};

/// The process-wide clients, by (master address, namespace).
type SharedClients = HashMap<(String, String), Arc<PsClient>>;

/// The client of an angel-ps service. Create one per process ([`PsClient::shared`]) and share it.
#[derive(Debug)]
pub struct PsClient {
    master_addr: String,
    pub(crate) master: MasterClient<AuthChannel>,
    config: ClientConfig,
    pub(crate) routing: RwLock<Routing>,
    seq: AtomicU64,
    /// Changes no snapshot holds yet, for partitions restored elsewhere.
    pub(crate) replays: ReplayBuffer,
    /// Held while this client asks for snapshots to make room in `replays`; when the last
    /// such snapshot failed.
    pub(crate) relieving: tokio::sync::Mutex<Option<Instant>>,
    /// Written while a new partition map is installed and this client's changes are replayed
    /// to the partitions it shows restored; read while a call routes its parts. So no call of
    /// this client reads a restored partition before the changes it lacks are back in it
    /// (read-your-writes across a recovery).
    pub(crate) recovering: tokio::sync::RwLock<()>,
}

impl PsClient {
    /// Connects to the master at `addr` (`host:port`) with default settings and the token
    /// and replay buffer the environment gives ([`ClientConfig::from_env`]).
    pub async fn connect(addr: &str) -> Result<Arc<Self>> {
        Self::connect_with(addr, ClientConfig::from_env()?).await
    }

    /// Connects to the master at `addr` and loads the partition map.
    pub async fn connect_with(addr: &str, config: ClientConfig) -> Result<Arc<Self>> {
        if !config.namespace.is_empty() {
            namespace::check(&config.namespace, "the client's namespace")?;
        }
        let replay_bytes = config.replay_bytes;
        let channel = endpoint(addr, &config)?
            .connect()
            .await
            .map_err(|e| unreachable(addr, &e))?;
        let client = Arc::new(PsClient {
            master_addr: addr.to_string(),
            master: MasterClient::with_interceptor(channel, config.credential())
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX),
            config,
            routing: RwLock::new(Routing::default()),
            seq: AtomicU64::new(0),
            replays: ReplayBuffer::new(replay_bytes),
            relieving: tokio::sync::Mutex::new(None),
            recovering: tokio::sync::RwLock::new(()),
        });
        client.refresh().await?;
        Ok(client)
    }

    /// The process-wide client for the master at `addr`, created on first use. Every task of a
    /// process shares it, and with it the connections and the cached map; they live on the
    /// client runtime ([`crate::runtime`]), so they outlive the runtime of the first caller. Its replay buffer
    /// holds `ANGEL_REPLAY_MB` megabytes when that is set ([`ClientConfig::from_env`]).
    pub async fn shared(addr: &str) -> Result<Arc<Self>> {
        Self::shared_in(addr, "").await
    }

    /// [`PsClient::shared`] for the names of `namespace` ([`ClientConfig::namespace`]): one
    /// client per service and namespace, so the jobs an executor serves keep their names apart.
    pub async fn shared_in(addr: &str, namespace: &str) -> Result<Arc<Self>> {
        Self::shared_or(addr, namespace, || {
            Ok(ClientConfig {
                namespace: namespace.to_string(),
                ..ClientConfig::from_env()?
            })
        })
        .await
    }

    /// [`PsClient::shared_in`] for `config.namespace`, made with `config` when this process
    /// has none yet: a command line sets up the client its job's functions will share.
    pub async fn shared_with(addr: &str, config: ClientConfig) -> Result<Arc<Self>> {
        let namespace = config.namespace.clone();
        Self::shared_or(addr, &namespace, || Ok(config)).await
    }

    async fn shared_or(
        addr: &str,
        namespace: &str,
        config: impl FnOnce() -> Result<ClientConfig>,
    ) -> Result<Arc<Self>> {
        static CLIENTS: OnceLock<tokio::sync::Mutex<SharedClients>> = OnceLock::new();
        let key = (addr.to_string(), namespace.to_string());
        let mut clients = CLIENTS.get_or_init(Default::default).lock().await;
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let config = config()?;
        let owned = addr.to_string();
        let client =
            crate::runtime::spawn(async move { Self::connect_with(&owned, config).await }).await?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// The name `name` has on the service: in this client's namespace unless it is qualified
    /// (holds a `/`) or the client has none.
    pub fn qualify(&self, name: &str) -> String {
        match self.config.namespace.as_str() {
            "" => name.to_string(),
            _ if name.contains('/') => name.to_string(),
            namespace => format!("{namespace}/{name}"),
        }
    }

    /// This client's namespace (empty: none).
    pub fn namespace(&self) -> &str {
        &self.config.namespace
    }

    /// The master address this client talks to.
    pub fn master_addr(&self) -> &str {
        &self.master_addr
    }

    /// Epoch of the cached partition map.
    pub fn map_epoch(&self) -> u64 {
        self.routing.read().epoch
    }
}
