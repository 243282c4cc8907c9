//! [`PsClient`]: the whole client API, shared by every task of a process.
//!
//! A call resolves the matrix from the cached partition map, splits its keys or rows by
//! partition, sends one request per server concurrently and reassembles the answers in request
//! order. When a server answers that the map moved (FAILED_PRECONDITION), the client refreshes
//! the map and resends only what that server refused; when a server does not answer at all,
//! the client reports it to the master, which restores its partitions elsewhere, and resends
//! there. Servers apply each (writer, seq) once per partition, so no update is applied twice.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use angel_proto::credential::{AuthChannel, Credential, Token};
use angel_proto::master_client::MasterClient;
use angel_proto::server_client::ServerClient;
use angel_proto::{
    Ack, Caller, ClockReply, ClockRequest, CounterIncreaseRequest, DescribeMatrixRequest,
    DropMatrixRequest, Element, EpochReport, GetPartitionMapRequest, Merge, OptimizerInfo,
    PartitionMap, PsError, PsfBlock, PsfOperand, PsfRequest, PullRequest, PushRequest,
    ReplayReport, ReportUnreachableRequest, Result, RowSlice, StatusReply, StatusRequest,
    StorageKind, codec, wire,
};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use prost::Message;
use tonic::transport::Endpoint;

use angel_proto::namespace;
use angel_proto::tls::{self, CA_VAR, Trust, chain};

use angel_proto::limits::{MAX_FRAME, WINDOW};
use angel_proto::merge::{finish, merge_into};

use crate::MatrixSpec;
use crate::counter_space::Counter;
use crate::matrix::Matrix;
use crate::replay::{Change, ReplayBuffer};
use crate::routes::{Routing, SendError, ServerConn, server_of};
use crate::split::KeySplit;
use crate::worker_calls::{PushOptions, WorkerClock};
use crate::task_change::TaskChange;

/// Retries after a stale-map answer before giving up.
const STALE_MAP_RETRIES: usize = 3;

/// How long a call to the master keeps retrying while the master is unreachable (a restart).
pub const MASTER_WAIT: Duration = Duration::from_secs(60);

/// How long a call keeps resending parts a server did not answer, while the master declares
/// it dead and restores its partitions elsewhere.
pub const RECOVERY_WAIT: Duration = Duration::from_secs(30);

/// How often a connection with calls in flight is pinged.
const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// How long a ping may go unanswered before the connection's calls fail.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(4);

/// Largest row a client materialises densely (2^28 elements, 1 GiB of f32).
const MAX_DENSE_ROW: u64 = 1 << 28;

/// How a client talks to the service.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Deadline of every request.
    pub timeout: Duration,
    /// Largest request the client sends; larger ones fail with [`PsError::TooLarge`] before
    /// anything is sent. Keep it at or below the servers' `--max-message-bytes`.
    pub max_message_bytes: usize,
    /// Identifies this client in requests (idempotent retries, per-client metrics).
    pub worker_id: u64,
    /// Bytes of changes kept until a snapshot holds them, to replay to a partition restored
    /// from an older snapshot; past it the oldest are dropped (counted as lost if needed).
    pub replay_bytes: usize,
    /// The service token sent with every request (`ANGEL_TOKEN` or `ANGEL_TOKEN_FILE`).
    pub token: Option<Token>,
    /// The CA the nodes' TLS certificates are checked against (`ANGEL_TLS_CA`); none: plain
    /// HTTP/2.
    pub trust: Option<Trust>,
    /// The namespace names are taken in: a matrix or counter `name` is `NAMESPACE/name` on the
    /// service, unless `name` holds a `/` itself (qualified on purpose). Empty: names are
    /// taken as given.
    pub namespace: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(30),
            max_message_bytes: 256 << 20,
            worker_id: u64::from(std::process::id()) << 20 | next_local_id(),
            replay_bytes: 256 << 20,
            token: None,
            trust: None,
            namespace: String::new(),
        }
    }
}

/// The variable that sizes the replay buffer of the clients SQL jobs and executors share.
pub const REPLAY_MB_VAR: &str = "ANGEL_REPLAY_MB";

impl ClientConfig {
    /// The defaults, with [`ClientConfig::replay_bytes`] from `ANGEL_REPLAY_MB` (megabytes)
    /// when it is set, the token of `ANGEL_TOKEN` or `ANGEL_TOKEN_FILE`, and the CA of
    /// `ANGEL_TLS_CA`; an error naming the variable when one is malformed.
    pub fn from_env() -> Result<Self> {
        let mut config = ClientConfig {
            token: Token::resolve(None)?,
            trust: Trust::resolve(None)?,
            ..ClientConfig::default()
        };
        if let Ok(text) = std::env::var(REPLAY_MB_VAR) {
            let mb: usize = text.trim().parse().map_err(|_| {
                PsError::InvalidArgument(format!(
                    "{REPLAY_MB_VAR}='{text}': give the replay buffer's size as a whole number \
                     of megabytes"
                ))
            })?;
            config.replay_bytes = mb.saturating_mul(1 << 20);
        }
        Ok(config)
    }

    /// The interceptor that adds the token to requests.
    fn credential(&self) -> Credential {
        Credential::new(self.token.as_ref())
    }
}

/// The process-wide clients, by (master address, namespace).
type SharedClients = HashMap<(String, String), Arc<PsClient>>;

/// The process id inside a default [`ClientConfig::worker_id`], so a status can name the
/// process (a Ballista executor, a job's client) behind each push.
pub fn worker_pid(worker_id: u64) -> u64 {
    worker_id >> 20
}

fn next_local_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

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

    /// Reloads the partition map from the master.
    pub async fn refresh(&self) -> Result<()> {
        let map = self
            .on_master(GetPartitionMapRequest {}, |mut m, r| async move {
                m.get_partition_map(r).await
            })
            .await?;
        let moved = self.install(map)?;
        self.replay(moved).await
    }

    /// Installs `map` unless it is older than the cached one; returns the partitions it shows
    /// restored on another server since.
    fn install(&self, map: PartitionMap) -> Result<Vec<Moved>> {
        let mut routing = self.routing.write();
        if map.epoch < routing.epoch {
            return Ok(Vec::new());
        }
        let moved = moved_partitions(&routing, &map);
        let mut servers = HashMap::new();
        for s in &map.servers {
            let conn = match routing.servers.get(&s.id) {
                Some(conn) if conn.addr == s.addr => conn.clone(),
                _ => ServerConn {
                    addr: s.addr.clone(),
                    rpc: ServerClient::with_interceptor(
                        endpoint(&s.addr, &self.config)?.connect_lazy(),
                        self.config.credential(),
                    )
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX),
                },
            };
            servers.insert(s.id, conn);
        }
        let mut by_name = HashMap::new();
        let mut by_id = HashMap::new();
        for meta in map.matrices {
            let mut matrix = Matrix::new(meta)?;
            matrix.keep_measurements(routing.by_id.get(&matrix.meta.id).map(Arc::as_ref));
            let matrix = Arc::new(matrix);
            by_id.insert(matrix.meta.id, matrix.clone());
            by_name.insert(matrix.meta.name.clone(), matrix);
        }
        let mut counters = HashMap::new();
        for meta in map.counters {
            let counter = Arc::new(Counter::new(meta)?);
            by_id.insert(counter.space.meta.id, counter.space.clone());
            counters.insert(counter.meta.name.clone(), counter);
        }
        *routing = Routing {
            epoch: map.epoch,
            servers,
            by_name,
            by_id,
            counters,
            optimizers: map.optimizers,
        };
        Ok(moved)
    }

    /// Resends to each restored partition the changes this client made that its snapshot
    /// does not hold, marked as replays (the server refuses any it applied already), and
    /// tells the master how many it replayed and lost per dead server.
    async fn replay(&self, moved: Vec<Moved>) -> Result<()> {
        let mut by_server: HashMap<u32, (u64, u64)> = HashMap::new();
        for m in moved {
            let (replayed, lost) = self.replay_partition(&m).await?;
            let tally = by_server.entry(m.from_server).or_default();
            tally.0 += replayed;
            tally.1 += lost;
        }
        for (server_id, (replayed, lost)) in by_server {
            if replayed + lost == 0 {
                continue;
            }
            let report = ReplayReport {
                server_id,
                replayed,
                lost,
            };
            self.on_master(report, |mut m, r| async move { m.report_replay(r).await })
                .await?;
        }
        Ok(())
    }

    /// Resends the changes partition `m` needs again; returns how many it replayed and how
    /// many were lost. If a resend fails, the changes not yet resent are counted as lost and
    /// the error returned.
    async fn replay_partition(&self, m: &Moved) -> Result<(u64, u64)> {
        let (id, pid) = (m.id, m.pid);
        let (changes, dropped) = self.replays.take(id, pid, m.restored);
        if changes.is_empty() {
            return Ok((0, dropped));
        }
        let count = changes.len();
        let conn = {
            let routing = self.routing.read();
            let server = server_of(&routing, id, pid)?;
            routing.servers.get(&server).cloned()
        };
        let Some(mut conn) = conn else {
            self.replays.lose(count as u64, id, pid);
            return Ok((0, dropped + count as u64));
        };
        for (sent, (caller, change)) in changes.into_iter().enumerate() {
            let caller = Caller {
                replay: true,
                map_epoch: self.map_epoch(),
                ..caller
            };
            let acks = match change.clone() {
                Change::Push {
                    matrix_id,
                    value_type,
                    gradients,
                    slices,
                } => conn
                    .rpc
                    .push(PushRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices,
                        gradients,
                        // A replayed DynSGD update applies unscaled by staleness.
                        bases: Vec::new(),
                    })
                    .await
                    .map(|r| r.into_inner().acks),
                Change::Count { counter_id, part } => conn
                    .rpc
                    .counter_increase(CounterIncreaseRequest {
                        caller: Some(caller),
                        counter_id,
                        parts: vec![part],
                    })
                    .await
                    .map(|r| r.into_inner().acks),
            };
            let acks = match acks {
                Ok(acks) => acks,
                Err(status) => {
                    self.replays.lose((count - sent) as u64, id, pid);
                    return Err(PsError::from_status(status, &conn.addr));
                }
            };
            for ack in &acks {
                self.replays.keep(id, ack, &caller, change.clone());
            }
        }
        tracing::info!(id, pid, count, "changes replayed to a restored partition");
        Ok((count as u64, dropped))
    }

    /// Changes this client replayed to restored partitions, and changes it could not (its
    /// replay buffer had dropped them for room): lost.
    pub fn replay_counts(&self) -> (u64, u64) {
        self.replays.counts()
    }

    pub(crate) fn master_error(&self, status: tonic::Status) -> PsError {
        PsError::from_status(status, &format!("master {}", self.master_addr))
    }

    /// Calls the master with `request`, retrying with back-off while it answers UNAVAILABLE
    /// (restarting, or waiting for its servers to register again) for up to [`MASTER_WAIT`].
    pub(crate) async fn on_master<R, T, Fut>(
        &self,
        request: R,
        call: impl Fn(MasterClient<AuthChannel>, R) -> Fut,
    ) -> Result<T>
    where
        R: Clone,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let deadline = Instant::now() + MASTER_WAIT;
        let mut wait = Duration::from_millis(50);
        loop {
            match call(self.master.clone(), request.clone()).await {
                Ok(reply) => return Ok(reply.into_inner()),
                Err(status) => match self.master_error(status) {
                    PsError::Unavailable(why) if Instant::now() < deadline => {
                        tracing::debug!(%why, "master unavailable; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(1));
                    }
                    PsError::Unavailable(why) => {
                        return Err(PsError::Unavailable(why + &self.tls_hint()));
                    }
                    e => return Err(e),
                },
            }
        }
    }

    /// What to say after "unreachable" when this client speaks plain HTTP/2: the service may
    /// serve TLS.
    fn tls_hint(&self) -> String {
        match self.config.trust {
            Some(_) => String::new(),
            None => format!(" (if the service serves TLS, set {CA_VAR} or --tls-ca to its CA)"),
        }
    }

    /// Creates a matrix; fails with ALREADY_EXISTS if the name is taken.
    pub async fn create_matrix(&self, spec: MatrixSpec) -> Result<Arc<Matrix>> {
        let spec = MatrixSpec {
            name: self.qualify(&spec.name),
            ..spec
        };
        self.on_master(spec.to_request(), |mut m, r| async move {
            m.create_matrix(r).await
        })
        .await?;
        self.refresh().await?;
        self.matrix(&spec.name).await
    }

    /// Drops a matrix and frees its partitions.
    pub async fn drop_matrix(&self, name: &str) -> Result<()> {
        self.on_master(
            DropMatrixRequest {
                name: self.qualify(name),
            },
            |mut m, r| async move { m.drop_matrix(r).await },
        )
        .await?;
        self.refresh().await
    }

    /// Asks the master for a matrix's current metadata.
    pub async fn describe(&self, name: &str) -> Result<Matrix> {
        let meta = self
            .on_master(
                DescribeMatrixRequest {
                    name: self.qualify(name),
                },
                |mut m, r| async move { m.describe_matrix(r).await },
            )
            .await?;
        Matrix::new(meta)
    }

    /// The matrix named `name` from the cached map, refreshing once if it is not there.
    pub async fn matrix(&self, name: &str) -> Result<Arc<Matrix>> {
        let name = &self.qualify(name);
        if let Some(m) = self.routing.read().by_name.get(name) {
            return Ok(m.clone());
        }
        self.refresh().await?;
        let routing = self.routing.read();
        routing.by_name.get(name).cloned().ok_or_else(|| {
            // Only this namespace's names: other jobs' are none of this one's business.
            let here = Some(self.namespace()).filter(|ns| !ns.is_empty());
            let mine = |n: &&str| namespace::split(n).0 == here;
            let mut known: Vec<&str> = routing
                .by_name
                .keys()
                .map(String::as_str)
                .filter(mine)
                .collect();
            known.sort_unstable();
            PsError::no_matrix(name, &known)
        })
    }

    /// The optimizer `name` as every server runs it, with the rows of state it keeps: a model
    /// trained with it has `1 + state_rows` rows. NOT_FOUND lists the optimizers available.
    pub async fn optimizer(&self, name: &str) -> Result<OptimizerInfo> {
        let find = |routing: &Routing| routing.optimizers.iter().find(|o| o.name == name).cloned();
        if let Some(o) = find(&self.routing.read()) {
            return Ok(o);
        }
        self.refresh().await?;
        let routing = self.routing.read();
        find(&routing).ok_or_else(|| {
            let known: Vec<&str> = routing.optimizers.iter().map(|o| o.name.as_str()).collect();
            PsError::NotFound(format!(
                "no optimizer named '{name}' runs on every server (available: {})",
                known.join(", ")
            ))
        })
    }

    /// Servers, matrices and partition sizes, as the master sees them.
    pub async fn status(&self) -> Result<StatusReply> {
        self.status_with(StatusRequest::default()).await
    }

    /// [`PsClient::status`], asking for more (each server's record of training pulls).
    pub async fn status_with(&self, request: StatusRequest) -> Result<StatusReply> {
        self.on_master(request, |mut m, r| async move { m.status(r).await })
            .await
    }

    /// A training worker's clock report (see [`ClockRequest`]): returns when the model's
    /// consistency model lets the worker go on. The master bounds each wait; this asks again
    /// until the answer is ready.
    pub async fn clock(&self, request: ClockRequest) -> Result<ClockReply> {
        let request = ClockRequest {
            model: self.qualify(&request.model),
            ..request
        };
        loop {
            let reply = self
                .on_master(request.clone(), |mut m, r| async move { m.clock(r).await })
                .await?;
            if reply.ready {
                return Ok(reply);
            }
        }
    }

    /// Tells the master a model finished an epoch, for the curves of its status page.
    pub async fn report_epoch(&self, report: EpochReport) -> Result<()> {
        let report = EpochReport {
            model: self.qualify(&report.model),
            ..report
        };
        self.on_master(report, |mut m, r| async move { m.report_epoch(r).await })
            .await
            .map(drop)
    }

    /// Pulls the values of `keys` in `row`, in request order. Duplicate keys are fetched once;
    /// only the partitions holding the keys are asked.
    pub async fn pull_keys<T: Element>(
        &self,
        name: &str,
        row: u64,
        keys: &[u64],
    ) -> Result<Vec<T>> {
        Ok(self.pull_at(name, &[row], keys, None).await?.0)
    }

    /// [`PsClient::pull_keys`] of the same `keys` in each of `rows`, in one request (a model
    /// with several outputs), by a training worker at its clock (`step`, which the servers
    /// record). Returns the values row after row, and the version of each partition read,
    /// for a DynSGD push.
    pub async fn pull_at<T: Element>(
        &self,
        name: &str,
        rows: &[u64],
        keys: &[u64],
        step: Option<WorkerClock>,
    ) -> Result<(Vec<T>, Vec<Ack>)> {
        let m = self.typed_matrix::<T>(name).await?;
        let compression = m.pull_compression();
        let mut splits = Vec::with_capacity(rows.len());
        let mut slices = Vec::new();
        for &row in rows {
            let band = m.layout.band(row)?;
            let split = KeySplit::new(&m.layout, band, keys)?;
            slices.extend(split.groups.iter().map(|g| {
                let (codec, keys) = codec::encode_keys(&compression, &g.keys);
                RowSlice {
                    partition_id: m.meta.partitions[band.part(g.pos)].id,
                    row,
                    keys,
                    values: Bytes::new(),
                    codec,
                }
            }));
            splits.push(split);
        }
        let versions = Mutex::new(Vec::new());
        let replies = self
            .send_slices(&m, slices, SliceOp::Pull(step, Some(&versions)))
            .await?;
        let mut replies = replies.iter();
        let mut values = Vec::with_capacity(rows.len() * keys.len());
        for split in &splits {
            let answers = (split.groups.iter())
                .zip(replies.by_ref())
                .map(|(g, reply)| decode_exact::<T>(&reply.values, g.keys.len(), &m))
                .collect::<Result<Vec<_>>>()?;
            values.extend(split.reassemble(&answers));
        }
        Ok((values, versions.into_inner()))
    }

    /// Pulls whole rows as dense vectors of `cols` values (absent sparse keys read as zero).
    pub async fn pull_rows<T: Element>(&self, name: &str, rows: &[u64]) -> Result<Vec<Vec<T>>> {
        let m = self.typed_matrix::<T>(name).await?;
        let cols = m.meta.cols;
        if cols > MAX_DENSE_ROW {
            return Err(PsError::TooLarge(format!(
                "rows of matrix '{name}' have {cols} columns, too many to pull densely; pull keys instead"
            )));
        }
        let mut slices = Vec::new();
        let mut places = Vec::new();
        for (i, &row) in rows.iter().enumerate() {
            let band = m.layout.band(row)?;
            for pos in 0..band.len() {
                let part = &m.meta.partitions[band.part(pos)];
                slices.push(RowSlice {
                    partition_id: part.id,
                    row,
                    ..Default::default()
                });
                places.push((i, band.cols(pos)));
            }
        }
        let replies = self
            .send_slices(&m, slices, SliceOp::Pull(None, None))
            .await?;
        let mut out = vec![vec![T::default(); cols as usize]; rows.len()];
        for (reply, (i, range)) in replies.iter().zip(places) {
            let width = (range.end - range.start) as usize;
            let dest = &mut out[i][range.start as usize..range.end as usize];
            if reply.keys.is_empty() && m.meta.storage() == StorageKind::Dense {
                wire::decode_values_into(&reply.values, dest, "pull reply values")?;
                continue;
            }
            let keys = wire::decode_keys(&reply.keys, "pull reply keys")?;
            let values = decode_exact::<T>(&reply.values, keys.len(), &m)?;
            for (k, v) in keys.into_iter().zip(values) {
                let col = k.checked_sub(range.start).filter(|&c| c < width as u64);
                let col = col.ok_or_else(|| {
                    PsError::Internal(format!("server returned key {k} outside block {range:?}"))
                })?;
                dest[col as usize] = v;
            }
        }
        Ok(out)
    }

    /// Adds `values` to `keys` of `row`. Duplicate keys are summed before sending.
    pub async fn push_keys<T: Element>(
        &self,
        name: &str,
        row: u64,
        keys: &[u64],
        values: &[T],
    ) -> Result<()> {
        self.push_with(name, &[row], keys, values, PushOptions::default())
            .await
    }

    /// Sends gradients of row 0 of a model matrix; the servers apply the optimizer of its
    /// training description per key (state in rows 1..). Duplicate keys are summed before
    /// sending.
    pub async fn push_gradients<T: Element>(
        &self,
        name: &str,
        keys: &[u64],
        grads: &[T],
    ) -> Result<()> {
        let how = PushOptions {
            gradients: true,
            ..Default::default()
        };
        self.push_with(name, &[0], keys, grads, how).await
    }

    /// Pushes `values` to the same `keys` of each of `rows` (values row after row) as one
    /// training step: added, or (`how.gradients`) applied by the optimizer to the weights rows
    /// named; named by a SQL task's change, so a rerun of the task repeats it without effect;
    /// stating the partition versions it was computed from (DynSGD). Duplicate keys are
    /// summed before sending.
    pub async fn push_with<T: Element>(
        &self,
        name: &str,
        rows: &[u64],
        keys: &[u64],
        values: &[T],
        how: PushOptions<'_>,
    ) -> Result<()> {
        if keys.len() * rows.len() != values.len() {
            let each = match rows.len() {
                1 => String::new(),
                n => format!(" in each of {n} rows"),
            };
            return Err(PsError::InvalidArgument(format!(
                "push to matrix '{name}': {} keys{each} but {} values",
                keys.len(),
                values.len()
            )));
        }
        let m = self.typed_matrix::<T>(name).await?;
        let start = Instant::now();
        let compression = m.push_compression();
        let mut slices: Vec<RowSlice> = Vec::new();
        for (&row, values) in rows.iter().zip(values.chunks(keys.len().max(1))) {
            let band = m.layout.band(row)?;
            let split = KeySplit::new(&m.layout, band, keys)?;
            slices.extend(
                split
                    .groups
                    .iter()
                    .zip(split.merge(values))
                    .map(|(g, merged)| {
                        let encoded = codec::encode_slice(&compression, &g.keys, &merged);
                        RowSlice {
                            partition_id: m.meta.partitions[band.part(g.pos)].id,
                            row,
                            keys: encoded.keys,
                            values: encoded.values,
                            codec: encoded.codec,
                        }
                    }),
            );
        }
        // Timed as it went: a slice falls back to raw when small or not smaller compressed.
        let sketched = slices.iter().any(|s| s.codec == codec::SKETCHML);
        self.send_slices(&m, slices, SliceOp::Push(how)).await?;
        if let Some(choice) = &m.choice {
            let raw_bytes = values.len() * (8 + std::mem::size_of::<T>());
            choice.record(sketched, raw_bytes, start.elapsed());
        }
        Ok(())
    }

    /// Adds a whole dense row (`values.len()` must equal the matrix's columns).
    pub async fn push_row<T: Element>(&self, name: &str, row: u64, values: &[T]) -> Result<()> {
        let m = self.typed_matrix::<T>(name).await?;
        if values.len() as u64 != m.meta.cols {
            return Err(PsError::InvalidArgument(format!(
                "push to row {row} of matrix '{name}': {} values for {} columns",
                values.len(),
                m.meta.cols
            )));
        }
        let band = m.layout.band(row)?;
        let slices = (0..band.len())
            .map(|pos| {
                let cols = band.cols(pos);
                RowSlice {
                    partition_id: m.meta.partitions[band.part(pos)].id,
                    row,
                    keys: Bytes::new(),
                    values: wire::encode_values(&values[cols.start as usize..cols.end as usize]),
                    codec: codec::RAW,
                }
            })
            .collect();
        self.send_slices(&m, slices, SliceOp::Push(PushOptions::default()))
            .await
            .map(drop)
    }

    /// Runs the PS function `name` on the servers over `operands` (matrix name, row) with
    /// scalar `args`, and combines the per-partition results with the merge the function
    /// declares. Operands must share one partition layout.
    pub async fn psf(
        &self,
        name: &str,
        operands: &[(&str, u64)],
        args: &[f64],
    ) -> Result<Vec<f64>> {
        let Some(&(first, first_row)) = operands.first() else {
            return Err(PsError::InvalidArgument(format!(
                "PS function '{name}' needs an operand"
            )));
        };
        let lead = self.matrix(first).await?;
        let mut matrices = Vec::with_capacity(operands.len());
        for &(matrix, row) in operands {
            let m = self.matrix(matrix).await?;
            m.layout.band(row)?;
            matrices.push((m, row));
        }
        let lead_band = lead.layout.band(first_row)?;
        let mut blocks = Vec::with_capacity(lead_band.len());
        for pos in 0..lead_band.len() {
            let lead_part = &lead.meta.partitions[lead_band.part(pos)];
            let mut ids = Vec::with_capacity(matrices.len());
            for (m, row) in &matrices {
                let band = m.layout.band(*row)?;
                let colocated = band.len() == lead_band.len()
                    && band.cols(pos) == lead_band.cols(pos)
                    && m.meta.partitions[band.part(pos)].server_id == lead_part.server_id;
                if !colocated {
                    return Err(PsError::InvalidArgument(format!(
                        "PS function '{name}': operands '{first}' and '{}' are partitioned differently",
                        m.meta.name
                    )));
                }
                ids.push(m.meta.partitions[band.part(pos)].id);
            }
            blocks.push(PsfBlock { partition_ids: ids });
        }
        let operand_msgs: Vec<PsfOperand> = matrices
            .iter()
            .map(|(m, row)| PsfOperand {
                matrix_id: m.meta.id,
                row: *row,
            })
            .collect();
        let merge_kind = Arc::new(Mutex::new(Merge::Sum));
        let lead_id = lead.meta.id;
        let results = self
            .scatter(
                blocks,
                None,
                |routing, block: &PsfBlock| server_of(routing, lead_id, block.partition_ids[0]),
                |mut conn, blocks, caller| {
                    let request = PsfRequest {
                        caller: Some(caller),
                        name: name.to_string(),
                        operands: operand_msgs.clone(),
                        args: args.to_vec(),
                        blocks,
                    };
                    let merge_kind = merge_kind.clone();
                    async move {
                        let reply = conn.rpc.call_psf(request).await?.into_inner();
                        *merge_kind.lock() = reply.merge();
                        Ok(reply.results.into_iter().map(|r| r.values).collect())
                    }
                },
            )
            .await?;
        let merge = *merge_kind.lock();
        let mut acc = Vec::new();
        for partial in &results {
            merge_into(merge, &mut acc, partial);
        }
        Ok(finish(merge, acc))
    }

    async fn typed_matrix<T: Element>(&self, name: &str) -> Result<Arc<Matrix>> {
        let m = self.matrix(name).await?;
        if m.value_type() != T::VALUE_TYPE {
            return Err(PsError::InvalidArgument(format!(
                "matrix '{name}' holds {:?} values, not {:?}",
                m.value_type(),
                T::VALUE_TYPE
            )));
        }
        Ok(m)
    }

    /// Pulls or pushes `slices` of matrix `m`; one reply slice per slice (empty for pushes).
    async fn send_slices(
        &self,
        m: &Matrix,
        slices: Vec<RowSlice>,
        op: SliceOp<'_>,
    ) -> Result<Vec<RowSlice>> {
        let (matrix_id, value_type) = (m.meta.id, m.meta.value_type);
        let limit = self.config.max_message_bytes;
        let name = m.meta.name.as_str();
        let change = match op {
            SliceOp::Push(how) => how.change,
            SliceOp::Pull(..) => None,
        };
        self.scatter(
            slices,
            change,
            |routing, s: &RowSlice| server_of(routing, matrix_id, s.partition_id),
            |mut conn, slices, mut caller| async move {
                if let SliceOp::Push(how) = op {
                    let gradients = how.gradients;
                    let count = slices.len();
                    let bases = how
                        .bases
                        .iter()
                        .filter(|b| slices.iter().any(|s| s.partition_id == b.partition_id))
                        .cloned()
                        .collect();
                    let request = PushRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices: slices.clone(),
                        gradients,
                        bases,
                    };
                    check_size(&request, limit, "push to", name, &conn.addr)?;
                    let reply = conn.rpc.push(request).await?.into_inner();
                    for ack in &reply.acks {
                        let change = Change::Push {
                            matrix_id,
                            value_type,
                            gradients,
                            slices: slices
                                .iter()
                                .filter(|s| s.partition_id == ack.partition_id)
                                .cloned()
                                .collect(),
                        };
                        self.replays.keep(matrix_id, ack, &caller, change);
                    }
                    Ok(vec![RowSlice::default(); count])
                } else {
                    let (step, versions) = match op {
                        SliceOp::Pull(step, versions) => (step, versions),
                        SliceOp::Push(_) => (None, None),
                    };
                    if let Some(step) = step {
                        caller.step_worker = step.worker;
                        caller.clock = step.clock;
                    }
                    let request = PullRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices,
                    };
                    check_size(&request, limit, "pull from", name, &conn.addr)?;
                    let reply = conn.rpc.pull(request).await?.into_inner();
                    if let Some(versions) = versions {
                        versions.lock().extend(reply.versions);
                    }
                    Ok(reply.slices)
                }
            },
        )
        .await
    }

    /// Sends `items` grouped by server, all servers concurrently, and returns one answer per
    /// item in input order. Items a server refuses as routed with a stale map are re-routed
    /// after a refresh; items a server never answered (it is unreachable, or gone from the map)
    /// are reported to the master, which probes the server and restores its partitions
    /// elsewhere, and are resent to the new owners for up to [`RECOVERY_WAIT`]. Resends keep
    /// the call's seq (or `change`'s name), so servers apply each part once; nothing a server
    /// accepted is resent.
    pub(crate) async fn scatter<I, R, Fut>(
        &self,
        items: Vec<I>,
        change: Option<TaskChange>,
        route: impl Fn(&Routing, &I) -> Result<u32>,
        send: impl Fn(ServerConn, Vec<I>, Caller) -> Fut,
    ) -> Result<Vec<R>>
    where
        I: Clone,
        Fut: Future<Output = std::result::Result<Vec<R>, SendError>>,
    {
        let mut answers: Vec<Option<R>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        let (task, seq) = match change {
            Some(c) => (c.task, c.seq),
            None => (0, self.seq.fetch_add(1, Ordering::Relaxed)),
        };
        let deadline = Instant::now() + RECOVERY_WAIT;
        let (mut stale_left, mut waits) = (STALE_MAP_RETRIES, 0u32);
        loop {
            let mut by_server: HashMap<u32, (ServerConn, Vec<usize>)> = HashMap::new();
            let mut down: HashMap<u32, String> = HashMap::new();
            let mut unrouted = Vec::new();
            {
                let routing = self.routing.read();
                for &i in &pending {
                    let server = route(&routing, &items[i])?;
                    match routing.servers.get(&server) {
                        Some(conn) => by_server
                            .entry(server)
                            .or_insert_with(|| (conn.clone(), Vec::new()))
                            .1
                            .push(i),
                        None => {
                            down.insert(server, "not in the partition map".into());
                            unrouted.push(i);
                        }
                    }
                }
            }
            let calls = by_server.into_iter().map(|(server, (conn, idx))| {
                let addr = conn.addr.clone();
                let batch = idx.iter().map(|&i| items[i].clone()).collect();
                let fut = send(conn, batch, self.caller(task, seq));
                async move { (server, idx, addr, fut.await) }
            });
            pending = unrouted;
            let mut stale = None;
            for (server, idx, addr, result) in futures::future::join_all(calls).await {
                match result {
                    Ok(replies) if replies.len() == idx.len() => {
                        for (i, r) in idx.into_iter().zip(replies) {
                            answers[i] = Some(r);
                        }
                    }
                    Ok(replies) => {
                        return Err(PsError::Internal(format!(
                            "server {addr} answered {} parts for {} asked",
                            replies.len(),
                            idx.len()
                        )));
                    }
                    Err(SendError::Local(e)) => return Err(e),
                    Err(SendError::Remote(status)) => match PsError::from_status(status, &addr) {
                        PsError::StaleMap(msg) if stale_left > 0 => {
                            stale = Some(msg);
                            pending.extend(idx);
                        }
                        PsError::Unavailable(msg) => {
                            down.insert(server, msg);
                            pending.extend(idx);
                        }
                        e => return Err(e),
                    },
                }
            }
            if pending.is_empty() {
                break;
            }
            if !down.is_empty() {
                if Instant::now() >= deadline {
                    let (server, msg) = down.into_iter().next().expect("not empty");
                    return Err(PsError::Unavailable(format!(
                        "server {server} did not come back or get replaced within \
                         {RECOVERY_WAIT:?}: {msg}"
                    )));
                }
                let epoch = self.map_epoch();
                for (server, msg) in down {
                    tracing::info!(server, %msg, "server unreachable; reporting it");
                    self.report_unreachable(server, &msg).await?;
                }
                if self.map_epoch() == epoch {
                    let wait = Duration::from_millis(50 << waits.min(4));
                    tokio::time::sleep(wait).await;
                    waits += 1;
                }
            } else if let Some(msg) = stale {
                tracing::debug!(%msg, "partition map moved; refreshing");
                stale_left -= 1;
                self.refresh().await?;
            }
        }
        // Changes this call made may have filled the replay buffer: make room before the next.
        self.relieve().await;
        answers
            .into_iter()
            .map(|a| a.ok_or_else(|| PsError::Internal("a request part got no answer".into())))
            .collect()
    }

    /// Tells the master `server` did not answer; installs the map it answers with (the
    /// server's partitions moved if it was dead), or fails with DATA_LOSS for lost partitions.
    async fn report_unreachable(&self, server: u32, error: &str) -> Result<()> {
        let request = ReportUnreachableRequest {
            server_id: server,
            error: error.to_string(),
        };
        let map = self
            .on_master(
                request,
                |mut m, r| async move { m.report_unreachable(r).await },
            )
            .await?;
        let moved = self.install(map)?;
        self.replay(moved).await
    }

    fn caller(&self, task: u64, seq: u64) -> Caller {
        Caller {
            worker_id: self.config.worker_id,
            task,
            seq,
            map_epoch: self.map_epoch(),
            ..Default::default()
        }
    }
}

/// A partition restored on another server: matrix or counter space `id`, partition `pid`,
/// the version its snapshot held, and the server it was on.
struct Moved {
    id: u32,
    pid: u32,
    restored: u64,
    from_server: u32,
}

/// The partitions of `map` that were restored on another server since `routing`'s map.
fn moved_partitions(routing: &Routing, map: &PartitionMap) -> Vec<Moved> {
    let spaces = map
        .matrices
        .iter()
        .chain(map.counters.iter().filter_map(|c| c.space.as_ref()));
    let mut moved = Vec::new();
    for meta in spaces {
        let Some(old) = routing.by_id.get(&meta.id) else {
            continue;
        };
        for (p, was) in meta.partitions.iter().zip(&old.meta.partitions) {
            if p.server_id != was.server_id {
                moved.push(Moved {
                    id: meta.id,
                    pid: p.id,
                    restored: p.restored_version,
                    from_server: was.server_id,
                });
            }
        }
    }
    moved
}

/// What [`PsClient::send_slices`] does: pull, or push (adding, or through an optimizer).
#[derive(Debug, Clone, Copy)]
enum SliceOp<'a> {
    /// A pull, by a training worker at its clock or not; collecting partition versions or not.
    Pull(Option<WorkerClock>, Option<&'a Mutex<Vec<Ack>>>),
    Push(PushOptions<'a>),
}

fn check_size(
    request: &impl Message,
    limit: usize,
    verb: &str,
    matrix: &str,
    addr: &str,
) -> Result<(), SendError> {
    let len = request.encoded_len();
    if len > limit {
        return Err(SendError::Local(PsError::TooLarge(format!(
            "{verb} matrix '{matrix}' on server {addr} would send {len} bytes, over the \
             {limit}-byte message limit; send fewer keys per call"
        ))));
    }
    Ok(())
}

fn decode_exact<T: Element>(bytes: &[u8], expected: usize, m: &Matrix) -> Result<Vec<T>> {
    let values: Vec<T> = wire::decode_values(bytes, "pull reply values")?;
    if values.len() != expected {
        return Err(PsError::Internal(format!(
            "pull from matrix '{}' returned {} values for {expected} asked",
            m.meta.name,
            values.len()
        )));
    }
    Ok(values)
}

/// Why the master at `addr` could not be reached, with the reason underneath tonic's
/// "transport error".
fn unreachable(addr: &str, e: &tonic::transport::Error) -> PsError {
    PsError::Unavailable(format!("master {addr} is unreachable: {}", chain(e)))
}

/// A tonic endpoint tuned for bulk transfers: large HTTP/2 windows, no Nagle delay, and the
/// configured request deadline; TLS when the config trusts a CA. While calls are in flight
/// the connection is pinged: a peer that stops answering (a frozen process) fails its calls
/// within [`KEEP_ALIVE`] plus [`KEEP_ALIVE_TIMEOUT`] instead of holding them as long as it
/// sleeps.
fn endpoint(addr: &str, config: &ClientConfig) -> Result<Endpoint> {
    tls::endpoint(addr, config.trust.as_ref()).map(|e| {
        e.timeout(config.timeout)
            .http2_keep_alive_interval(KEEP_ALIVE)
            .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .initial_stream_window_size(Some(WINDOW))
            .initial_connection_window_size(Some(WINDOW))
            .max_frame_size(Some(MAX_FRAME))
    })
}
