//! The master's gRPC handlers over its [`State`] (servers, matrices, and the epoch of the
//! partition map, which increases on every change).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_proto::credential::Credential;
use angel_proto::master_server::Master;
use angel_proto::tls::Trust;
use angel_proto::{
    ClockReply, ClockRequest, CounterMeta, CounterRequest, CreateMatrixRequest,
    CreatePartitionsRequest, DescribeMatrixRequest, DropCounterReply, DropMatrixReply,
    DropMatrixRequest, DropPartitionsRequest, EpochReport, EpochReportReply,
    GetPartitionMapRequest, HeartbeatReply, HeartbeatRequest, JobPhase, JobReply, JobRequest,
    Layout, MatrixMeta, Partition, PartitionMap, PsError, RegisterServerReply,
    RegisterServerRequest, ReplayReport, ReplayReportReply, ReportUnreachableRequest, Result,
    RotatePhase, RotateReply, RotateRequest, SealCounterRequest, ServerStatus, SnapshotReply,
    SnapshotRequest, StatsRequest, StatusReply, StatusRequest, StorageKind, Sync, TrainedRowsReply,
    TrainedRowsReport, ValueType, WriteSnapshotRequest,
};
use parking_lot::Mutex;
use prost::Message;
use tonic::{Request, Response, Status};

use super::clocks::Clocks;
use super::jobs::Jobs;
use super::progress::Progress;
use super::quota::Quotas;
use super::rotation::Rotations;
use super::state::{Placement, ServerEntry, State};
use super::trained_rows::TrainedRows;
use super::{Partitioner, optimizers};
use crate::access::Access;
use crate::snapshot::SnapshotDir;

/// Largest column count: keys are below 2^63 so u64::MAX stays free as a storage marker.
pub const MAX_COLS: u64 = 1 << 63;
/// Largest row count of one matrix.
pub const MAX_ROWS: u64 = 1 << 24;
/// Longest matrix name.
pub(super) const MAX_NAME: usize = 256;
/// Deadline of master -> server calls.
pub(super) const SERVER_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline of the per-server statistics gathered for `status`.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest server address.
pub(super) const MAX_ADDR: usize = 256;
/// Largest total size of a matrix's attributes (keys and values), in bytes.
const MAX_ATTRS_BYTES: usize = 64 << 10;

/// Where and how often servers snapshot their partitions.
#[derive(Debug, Clone)]
pub struct Snapshots {
    /// None: no snapshots.
    pub dir: Option<SnapshotDir>,
    /// Between two snapshots of a changed partition.
    pub interval: Duration,
}

impl Default for Snapshots {
    /// No snapshots; every 10 s once a directory is set.
    fn default() -> Self {
        Snapshots {
            dir: None,
            interval: Duration::from_secs(10),
        }
    }
}

/// The master's gRPC service.
pub struct MasterService {
    pub(super) state: Mutex<State>,
    /// Held while the state is written, so writes never interleave; holds the last change
    /// ([`Self::state_changes`]) a completed write covers.
    pub(super) persisting: Mutex<u64>,
    /// Changes made to the state so far, each counted once made (`state_file`'s group
    /// commit).
    pub(super) state_changes: std::sync::atomic::AtomicU64,
    /// Serialises creation and counter sealing so names, ids and indices are decided once.
    pub(super) creating: tokio::sync::Mutex<()>,
    partitioners: BTreeMap<String, Arc<dyn Partitioner>>,
    /// See [`super::MasterConfig::server_timeout`].
    pub(super) server_timeout: Duration,
    pub(super) snapshots: Snapshots,
    /// Training workers' clocks, per model.
    pub(super) clocks: Clocks,
    /// Rotating models' rounds and leases.
    pub(super) rotations: Rotations,
    /// Jobs' runs and how far each job got.
    pub(super) jobs: Jobs,
    /// Finished epochs per model, for the status page.
    pub(super) progress: Progress,
    /// Rows trained per model so far, for jobs' progress bars.
    pub(super) trained_rows: TrainedRows,
    /// The service token, sent with every call to a server.
    pub(super) credential: Credential,
    /// The CA servers' certificates are checked against; none: plain HTTP/2.
    pub(super) trust: Option<Trust>,
    /// Ignore a saved state, and have servers the master does not know drop what they hold
    /// (`--start-empty`).
    pub(super) start_empty: bool,
    /// What one namespace may hold.
    pub(super) quotas: Quotas,
}

impl MasterService {
    /// A master with the given partitioners (by name), taking servers silent for
    /// `server_timeout` out of new placements, whose servers write `snapshots`, calling its
    /// servers with `credential`, over TLS checked against `trust` when given, ignoring
    /// what servers hold and a saved state if `start_empty`, each namespace held to `quotas`.
    pub fn new(
        partitioners: Vec<Arc<dyn Partitioner>>,
        server_timeout: Duration,
        snapshots: Snapshots,
        credential: Credential,
        trust: Option<Trust>,
        start_empty: bool,
        quotas: Quotas,
    ) -> Self {
        MasterService {
            state: Mutex::new(State {
                // Never 0, which marks states saved before services had an identity.
                service: rand::random::<u64>().max(1),
                ..State::default()
            }),
            persisting: Mutex::new(0),
            state_changes: Default::default(),
            creating: tokio::sync::Mutex::new(()),
            server_timeout,
            snapshots,
            clocks: Clocks::new(quotas.workers),
            rotations: Rotations::default(),
            jobs: Jobs::default(),
            progress: Progress::default(),
            trained_rows: TrainedRows::default(),
            credential,
            trust,
            start_empty,
            quotas,
            partitioners: partitioners
                .into_iter()
                .map(|p| (p.name().to_string(), p))
                .collect(),
        }
    }

    async fn create(&self, request: CreateMatrixRequest) -> Result<MatrixMeta> {
        let _creating = self.creating.lock().await;
        let (meta, servers) = self.plan(&request)?;
        let epoch = self.next_epoch();
        let mut placed = Vec::new();
        let mut failure = None;
        let calls = servers.iter().map(|(&id, (entry, pids))| {
            let mut rpc = entry.rpc.clone();
            let call = CreatePartitionsRequest {
                matrix: Some(meta.clone()),
                partition_ids: pids.clone(),
                epoch,
                restore: false,
            };
            async move { (id, entry.addr.clone(), rpc.create_partitions(call).await) }
        });
        for (id, addr, result) in futures::future::join_all(calls).await {
            match result {
                Ok(_) => placed.push(id),
                Err(status) => {
                    failure = Some(PsError::from_status(status, &format!("server {addr}")))
                }
            }
        }
        if let Some(err) = failure {
            self.drop_on(&servers, &placed, meta.id, epoch).await;
            return Err(err);
        }
        let mut state = self.state.lock();
        state.epoch += 1;
        state.matrices.insert(meta.name.clone(), meta.clone());
        drop(state);
        self.persist();
        tracing::info!(name = %meta.name, partitions = meta.partitions.len(), "matrix created");
        Ok(meta)
    }

    /// Validates a create request and decides blocks, ids and placement.
    pub(super) fn plan(&self, r: &CreateMatrixRequest) -> Result<(MatrixMeta, Placement)> {
        validate(r)?;
        self.check_trusted()?;
        let name = if r.partitioner.is_empty() {
            "range"
        } else {
            &r.partitioner
        };
        let partitioner = self.partitioners.get(name).ok_or_else(|| {
            PsError::NotFound(format!(
                "no partitioner named '{name}' (registered: {})",
                self.partitioners
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let mut state = self.state.lock();
        if state.matrices.contains_key(&r.name) {
            return Err(PsError::AlreadyExists(format!(
                "matrix '{}' already exists",
                r.name
            )));
        }
        self.quotas.check_create(&state, r)?;
        let ids: Vec<u32> = state
            .live_servers(self.server_timeout)
            .into_iter()
            .filter(|id| !state.servers[id].standby)
            .collect();
        if ids.is_empty() {
            return Err(PsError::Unavailable(format!(
                "no live servers to hold partitions: {} registered ({} standby), none other \
                 heard from in the last {:?}",
                state.servers.len(),
                state.servers.values().filter(|s| s.standby).count(),
                self.server_timeout
            )));
        }
        optimizers::check_model(r, &state.optimizers())?;
        let blocks = partitioner.partition(r, ids.len())?;
        let id = state.next_matrix;
        state.next_matrix += 1;
        let partitions: Vec<Partition> = blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| Partition {
                id: i as u32,
                row_start: b.rows.start,
                row_end: b.rows.end,
                col_start: b.cols.start,
                col_end: b.cols.end,
                server_id: ids[i % ids.len()],
                restored_version: 0,
            })
            .collect();
        let meta = MatrixMeta {
            id,
            name: r.name.clone(),
            rows: r.rows,
            cols: r.cols,
            value_type: r.value_type,
            storage: r.storage,
            partitioner: name.to_string(),
            partitions,
            attrs: r.attrs.clone(),
            training: r.training.clone(),
        };
        Layout::new(&meta).map_err(|e| {
            PsError::InvalidArgument(format!("partitioner '{name}' returned a bad layout: {e}"))
        })?;
        let servers = state.placement(&meta)?;
        Ok((meta, servers))
    }

    /// How model `name`'s workers keep in step: the `sync` of its matrix's training
    /// description; an error when there is no such model.
    fn sync_of(&self, name: &str) -> Result<Sync> {
        let state = self.state.lock();
        let training = state.matrix(name)?.training.as_ref();
        training.and_then(|t| t.sync).ok_or_else(|| {
            PsError::InvalidArgument(format!(
                "clock report: matrix '{name}' has no sync options in its training \
                 description; only a model's workers keep clocks"
            ))
        })
    }

    async fn drop_on(&self, servers: &Placement, which: &[u32], matrix_id: u32, epoch: u64) {
        let calls = which.iter().map(|id| {
            let entry = servers[id].0.clone();
            async move {
                let request = DropPartitionsRequest { matrix_id, epoch };
                if let Err(status) = entry.rpc.clone().drop_partitions(request).await {
                    tracing::warn!(addr = %entry.addr, %status, "could not free partitions");
                }
            }
        });
        futures::future::join_all(calls).await;
    }

    async fn drop_matrix(&self, name: &str) -> Result<()> {
        self.check_trusted()?;
        let (meta, epoch, servers) = {
            let mut state = self.state.lock();
            let meta = state.matrix(name)?.clone();
            state.matrices.remove(name);
            state.epoch += 1;
            (meta, state.epoch, state.every_server())
        };
        self.persist();
        let ids: Vec<u32> = servers.keys().copied().collect();
        self.drop_on(&servers, &ids, meta.id, epoch).await;
        tracing::info!(%name, "matrix dropped");
        Ok(())
    }

    /// The snapshot directory's URL; empty without one.
    pub(super) fn snapshot_url(&self) -> String {
        self.snapshots
            .dir
            .as_ref()
            .map_or(String::new(), |d| d.url())
    }

    /// Asks every server to write the partitions that changed since their last snapshot, of
    /// the matrices and counters `names` (all when empty), and sums what they wrote.
    async fn snapshot(&self, names: &[String]) -> Result<SnapshotReply> {
        if self.snapshots.dir.is_none() && !names.is_empty() {
            return Ok(SnapshotReply::default());
        }
        if self.snapshots.dir.is_none() {
            return Err(PsError::WrongState(
                "this master runs without snapshots; start it with --snapshot-dir URL (a path, \
                 or an s3:// or hdfs:// URL)"
                    .into(),
            ));
        }
        let started = Instant::now();
        let (servers, ids) = {
            let state = self.state.lock();
            let servers: Vec<ServerEntry> = state.servers.values().cloned().collect();
            let matrices = names
                .iter()
                .filter_map(|n| state.matrices.get(n).map(|m| m.id));
            let counters = names
                .iter()
                .filter_map(|n| state.counters.get(n).map(|c| c.id));
            (servers, matrices.chain(counters).collect::<Vec<u32>>())
        };
        if !names.is_empty() && ids.is_empty() {
            return Ok(SnapshotReply::default());
        }
        let calls = servers.into_iter().map(|s| {
            let request = WriteSnapshotRequest { ids: ids.clone() };
            async move {
                s.rpc
                    .clone()
                    .write_snapshot(request)
                    .await
                    .map(|r| r.into_inner())
                    .map_err(|e| PsError::from_status(e, &format!("server {}", s.addr)))
            }
        });
        let mut total = SnapshotReply::default();
        for reply in futures::future::join_all(calls).await {
            let reply = reply?;
            total.partitions += reply.partitions;
            total.bytes += reply.bytes;
            total.max_pause_us = total.max_pause_us.max(reply.max_pause_us);
            total.durable.extend(reply.durable);
        }
        total.millis = started.elapsed().as_millis() as u64;
        tracing::info!(
            partitions = total.partitions,
            bytes = total.bytes,
            "snapshot written"
        );
        Ok(total)
    }

    /// The service's state; as `request` asks, each server's record of training pulls and
    /// each model's epochs too.
    pub(super) async fn status(&self, request: StatusRequest) -> StatusReply {
        let pulls = request.pulls;
        let (map, servers) = {
            let state = self.state.lock();
            (state.map(), state.servers.clone())
        };
        let calls = servers.into_iter().map(|(id, s)| async move {
            let mut status = ServerStatus {
                server_id: id,
                addr: s.addr.clone(),
                standby: s.standby,
                last_heartbeat_ms: s.last_seen.elapsed().as_millis() as u64,
                ..Default::default()
            };
            let mut request = Request::new(StatsRequest { pulls });
            request.set_timeout(STATUS_TIMEOUT);
            match s.rpc.clone().stats(request).await {
                Ok(reply) => {
                    let reply = reply.into_inner();
                    status.reachable = true;
                    status.partitions = reply.partitions;
                    status.pushes = reply.pushes;
                    status.pulls = reply.pulls;
                    status.snapshot_error = reply.snapshot_error;
                    status.seen_epoch = reply.seen_epoch;
                }
                Err(e) => status.error = PsError::from_status(e, &s.addr).to_string(),
            }
            status
        });
        let servers = futures::future::join_all(calls).await;
        let (recoveries, doubt, state_error) = {
            let state = self.state.lock();
            let (doubt, error) = (state.doubt.clone(), state.state_error.clone());
            (state.recoveries.clone(), doubt, error)
        };
        StatusReply {
            map: Some(map),
            servers,
            snapshot_dir: self.snapshot_url(),
            snapshot_interval_ms: self.snapshots.interval.as_millis() as u64,
            recoveries,
            doubt: doubt.unwrap_or_default(),
            state_error: state_error.unwrap_or_default(),
            workers: self.clocks.status(),
            epochs: match request.epochs {
                true => self.progress.all(),
                false => Vec::new(),
            },
            // Set for a namespace token by `Access::filter_status`.
            namespaces: Vec::new(),
            leases: match request.leases {
                true => self.rotations.leases(),
                false => Vec::new(),
            },
        }
    }
}

fn validate(r: &CreateMatrixRequest) -> Result<()> {
    let bad = |why: String| {
        Err(PsError::InvalidArgument(format!(
            "matrix '{}': {why}",
            r.name
        )))
    };
    if r.name.is_empty() || r.name.len() > MAX_NAME {
        return Err(PsError::InvalidArgument(format!(
            "a matrix name must have 1 to {MAX_NAME} bytes, got {}",
            r.name.len()
        )));
    }
    if r.rows == 0 || r.cols == 0 {
        return bad(format!("shape {} x {} has no elements", r.rows, r.cols));
    }
    if r.rows > MAX_ROWS {
        return bad(format!("{} rows is over the limit of {MAX_ROWS}", r.rows));
    }
    if r.cols > MAX_COLS {
        return bad(format!("{} columns is over the limit of 2^63", r.cols));
    }
    if !matches!(ValueType::try_from(r.value_type), Ok(t) if t != ValueType::Unspecified) {
        return bad(format!(
            "value type {} is not one of F32, F64, I64",
            r.value_type
        ));
    }
    if !matches!(StorageKind::try_from(r.storage), Ok(k) if k != StorageKind::Unspecified) {
        return bad(format!("storage kind {} is not DENSE or SPARSE", r.storage));
    }
    let attrs_bytes: usize = r
        .attrs
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum::<usize>()
        + r.training.as_ref().map_or(0, Message::encoded_len);
    if attrs_bytes > MAX_ATTRS_BYTES {
        return bad(format!(
            "attributes and training description of {attrs_bytes} bytes are over the limit of \
             {MAX_ATTRS_BYTES}"
        ));
    }
    if let Some(training) = &r.training {
        training
            .codec()
            .map_err(|e| PsError::InvalidArgument(format!("matrix '{}': {e}", r.name)))?;
        if angel_proto::UpdateRule::try_from(training.update).is_err() {
            return bad(format!(
                "update rule {} is not one of the four",
                training.update
            ));
        }
    }
    Ok(())
}

fn answer<T>(result: Result<T>) -> std::result::Result<Response<T>, Status> {
    result.map(Response::new).map_err(Status::from)
}

#[tonic::async_trait]
impl Master for MasterService {
    async fn register_server(
        &self,
        request: Request<RegisterServerRequest>,
    ) -> std::result::Result<Response<RegisterServerReply>, Status> {
        Access::require_all(&request, "registering a server")?;
        answer(self.register(request.into_inner()).await)
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> std::result::Result<Response<HeartbeatReply>, Status> {
        Access::require_all(&request, "a server's heartbeat")?;
        answer(self.heartbeat(request.into_inner()))
    }

    async fn create_matrix(
        &self,
        request: Request<CreateMatrixRequest>,
    ) -> std::result::Result<Response<MatrixMeta>, Status> {
        Access::allows(&request, "matrix", &request.get_ref().name)?;
        answer(self.create(request.into_inner()).await)
    }

    async fn drop_matrix(
        &self,
        request: Request<DropMatrixRequest>,
    ) -> std::result::Result<Response<DropMatrixReply>, Status> {
        Access::allows(&request, "matrix", &request.get_ref().name)?;
        answer(
            self.drop_matrix(&request.into_inner().name)
                .await
                .map(|()| DropMatrixReply {}),
        )
    }

    async fn describe_matrix(
        &self,
        request: Request<DescribeMatrixRequest>,
    ) -> std::result::Result<Response<MatrixMeta>, Status> {
        Access::allows(&request, "matrix", &request.get_ref().name)?;
        let name = request.into_inner().name;
        answer(self.state.lock().matrix(&name).cloned())
    }

    async fn get_partition_map(
        &self,
        request: Request<GetPartitionMapRequest>,
    ) -> std::result::Result<Response<PartitionMap>, Status> {
        let mut map = self.state.lock().map();
        Access::of(&request).filter_map(&mut map);
        Ok(Response::new(map))
    }

    async fn status(
        &self,
        request: Request<StatusRequest>,
    ) -> std::result::Result<Response<StatusReply>, Status> {
        let access = Access::of(&request);
        let mut status = self.status(request.into_inner()).await;
        access.filter_status(&mut status);
        Ok(Response::new(status))
    }

    async fn create_counter(
        &self,
        request: Request<CounterRequest>,
    ) -> std::result::Result<Response<CounterMeta>, Status> {
        Access::allows(&request, "counter", &request.get_ref().name)?;
        let request = request.into_inner();
        answer(self.create_counter(&request.name, request.replace).await)
    }

    async fn seal_counter(
        &self,
        request: Request<SealCounterRequest>,
    ) -> std::result::Result<Response<CounterMeta>, Status> {
        Access::allows(&request, "counter", &request.get_ref().name)?;
        let request = request.into_inner();
        answer(self.seal_counter(&request.name, request.min_count).await)
    }

    async fn clean_counter(
        &self,
        request: Request<CounterRequest>,
    ) -> std::result::Result<Response<CounterMeta>, Status> {
        Access::allows(&request, "counter", &request.get_ref().name)?;
        answer(self.clean_counter(&request.into_inner().name).await)
    }

    async fn drop_counter(
        &self,
        request: Request<CounterRequest>,
    ) -> std::result::Result<Response<DropCounterReply>, Status> {
        Access::allows(&request, "counter", &request.get_ref().name)?;
        let name = request.into_inner().name;
        answer(self.drop_counter(&name).await.map(|()| DropCounterReply {}))
    }

    async fn snapshot(
        &self,
        request: Request<SnapshotRequest>,
    ) -> std::result::Result<Response<SnapshotReply>, Status> {
        let names = &request.get_ref().names;
        if names.is_empty() {
            Access::require_all(&request, "a snapshot of every server")?;
        }
        for name in names {
            Access::allows(&request, "matrix or counter", name)?;
        }
        answer(self.snapshot(&request.into_inner().names).await)
    }

    async fn report_unreachable(
        &self,
        request: Request<ReportUnreachableRequest>,
    ) -> std::result::Result<Response<PartitionMap>, Status> {
        let access = Access::of(&request);
        let request = request.into_inner();
        let error: String = request.error.chars().take(MAX_ADDR * 4).collect();
        let map = self.report_unreachable(request.server_id, &error).await;
        answer(map.map_err(|e| access.filter_error(e)).map(|mut map| {
            access.filter_map(&mut map);
            map
        }))
    }

    async fn report_replay(
        &self,
        request: Request<ReplayReport>,
    ) -> std::result::Result<Response<ReplayReportReply>, Status> {
        let access = Access::of(&request);
        answer(
            self.report_replay(&request.into_inner(), &access)
                .map(|()| ReplayReportReply {}),
        )
    }

    async fn clock(
        &self,
        request: Request<ClockRequest>,
    ) -> std::result::Result<Response<ClockReply>, Status> {
        Access::allows(&request, "model", &request.get_ref().model)?;
        let request = request.into_inner();
        if request.model.len() > MAX_ADDR {
            return Err(Status::invalid_argument(format!(
                "clock report: model name of {} bytes (at most {MAX_ADDR})",
                request.model.len()
            )));
        }
        let sync = self.sync_of(&request.model)?;
        self.clocks.admit(&request)?;
        Ok(Response::new(self.clocks.clock(&request, &sync).await))
    }

    async fn rotate(
        &self,
        request: Request<RotateRequest>,
    ) -> std::result::Result<Response<RotateReply>, Status> {
        Access::allows(&request, "model", &request.get_ref().model)?;
        let request = request.into_inner();
        let sync = self.sync_of(&request.model)?;
        if sync.rotation_slices == 0 {
            return Err(Status::failed_precondition(format!(
                "rotate: model '{}' does not rotate (its training description has no \
                 rotation slices)",
                request.model
            )));
        }
        let reply = self.rotations.rotate(&request, &sync).await;
        // A round's progress is saved before its worker hears of it, so a master restarted on
        // its snapshot directory resumes the round (an acquire still waiting changed nothing).
        // A state that cannot be saved fails the call, which the worker asks again (and is
        // answered the same), rather than hear what a restart would forget.
        let waited = request.phase() == RotatePhase::Acquire;
        if reply.as_ref().is_ok_and(|r| r.ready || !waited) {
            self.persist_or_fail()?;
        }
        answer(reply)
    }

    async fn job(
        &self,
        request: Request<JobRequest>,
    ) -> std::result::Result<Response<JobReply>, Status> {
        Access::allows(&request, "job", &request.get_ref().job)?;
        let request = request.into_inner();
        let reply = self.jobs.handle(&request);
        // A renewal changes no progress; every other phase is saved before it is answered.
        if reply.is_ok() && request.phase() != JobPhase::Renew {
            self.persist_or_fail()?;
        }
        answer(reply)
    }

    async fn report_epoch(
        &self,
        request: Request<EpochReport>,
    ) -> std::result::Result<Response<EpochReportReply>, Status> {
        Access::allows(&request, "model", &request.get_ref().model)?;
        answer(
            self.progress
                .record(request.into_inner())
                .map(|()| EpochReportReply {}),
        )
    }

    async fn report_trained_rows(
        &self,
        request: Request<TrainedRowsReport>,
    ) -> std::result::Result<Response<TrainedRowsReply>, Status> {
        Access::allows(&request, "model", &request.get_ref().model)?;
        answer(self.trained_rows.add(request.get_ref()))
    }
}
