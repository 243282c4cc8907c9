//! The server's gRPC handlers. Each validates the whole request (value type, rows, keys,
//! lengths, size) before touching storage, so a bad request changes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use angel_proto::server_server::Server;
use angel_proto::value::value_size;
use angel_proto::{
    Ack, ClientPushes, CounterAdminReply, CounterAdminRequest, CounterGetReply, CounterGetRequest,
    CounterIncreaseReply, CounterIncreaseRequest, CreatePartitionsReply, CreatePartitionsRequest,
    DropPartitionsReply, DropPartitionsRequest, MatrixMeta, PartitionStats, PsError, PsfReply,
    PsfRequest, PsfValues, PullReply, PullRequest, PushReply, PushRequest, Result, RowSlice,
    SnapshotReply, StatsReply, StatsRequest, StorageKind, ValueType, WriteSnapshotRequest, codec,
    wire,
};
use prost::Message;
use tonic::{Request, Response, Status};

use super::applied::{Applied, Snapshotted, ack};
use super::memory::{MemoryAccount, Reservation, Use};
use super::partition::{Partition, Partitions, record_bytes};
use super::pull_log::PullLog;
use super::push_metrics::PushMetrics;
use crate::access::Access;
use crate::blocks::{AnyBlock, Growth, RowView};
use crate::optim::{Optimizer, OptimizerParams, OptimizerRegistry};
use crate::psf::{PsfContext, PsfRegistry};
use crate::server::Functions;
use crate::snapshot::SnapshotDir;
use crate::{admin, with_block};
use angel_optim::rule::{self, Rule};

/// The state behind one server's gRPC service.
pub struct ServerService {
    /// Hosted partitions.
    pub parts: Arc<Partitions>,
    /// PS functions this server runs.
    pub psfs: PsfRegistry,
    /// Optimizers this server applies to pushed gradients.
    pub optimizers: OptimizerRegistry,
    /// The largest request it accepts and the bytes of partition data it may hold.
    pub limits: super::Limits,
    /// The bytes of partition data it holds, which every growth reserves from first.
    pub memory: MemoryAccount,
    /// Id the master gave this server, once registered.
    pub server_id: Arc<std::sync::atomic::AtomicU32>,
    /// The credential of the master's calls (see [`crate::admin`]).
    pub admin_token: String,
    /// Accepted pushes per client and matrix.
    pub pushes: PushMetrics,
    /// Training pulls, with worker and clock.
    pub pulls: PullLog,
    /// Where partitions are snapshotted, as the master said at registration.
    pub snapshot_dir: parking_lot::RwLock<Option<SnapshotDir>>,
    /// Held while snapshots are written: one writer per partition directory at a time.
    pub snapshot_writer: parking_lot::Mutex<()>,
    /// Why the last periodic snapshot failed; None once one succeeds (shown in the status).
    pub snapshot_error: parking_lot::Mutex<Option<String>>,
    /// How long this server may serve on its master's last word.
    pub lease: super::lease::Lease,
    /// This server's `node` label in metrics (`server@ADDR`).
    pub node: String,
}

/// Bytes of the keys and values of `slices`.
fn payload(slices: &[RowSlice]) -> u64 {
    slices
        .iter()
        .map(|s| (s.keys.len() + s.values.len()) as u64)
        .sum()
}

/// Decodes every compressed slice in place (keys and values become raw); returns how many
/// were compressed. The request's decoded payload may not pass `limit` bytes, the limit a raw
/// request has: each slice's declared pair count is checked against what is left before
/// anything is allocated.
fn decode_slices(slices: &mut [RowSlice], value_type: i32, limit: usize) -> Result<u64> {
    let value_type = ValueType::try_from(value_type).unwrap_or(ValueType::Unspecified);
    let pair = 8 + value_size(value_type);
    let mut room = limit.saturating_sub(payload(slices) as usize);
    let mut compressed = 0;
    for s in slices.iter_mut().filter(|s| s.codec != codec::RAW) {
        let (keys, values) = codec::decode_slice(
            s.codec,
            std::mem::take(&mut s.keys),
            std::mem::take(&mut s.values),
            value_type,
            room / pair,
        )?;
        room = room.saturating_sub(keys.len() + values.len());
        (s.keys, s.values, s.codec) = (keys, values, codec::RAW);
        compressed += 1;
    }
    Ok(compressed)
}

/// A pull reply may be this many times the request limit: whole rows are named once each, so
/// a reply is bounded by the data the server holds, and this bounds what one call can ask.
const REPLY_FACTOR: usize = 4;

/// A slice checked against its partition, ready to apply.
struct Checked {
    part: Arc<Partition>,
    row: u64,
    keys: Option<Vec<u64>>,
    values: bytes::Bytes,
}

impl ServerService {
    /// A service running `functions`, whose master's calls carry `admin_token`, labelled
    /// `node` in metrics: no partitions, no snapshot directory, no memory limit, the default
    /// request limit.
    pub fn new(functions: Functions, admin_token: String, node: String) -> Self {
        ServerService {
            parts: Default::default(),
            psfs: functions.psfs,
            optimizers: functions.optimizers,
            limits: super::Limits {
                memory_budget: u64::MAX,
                ..Default::default()
            },
            memory: MemoryAccount::new(u64::MAX),
            server_id: Default::default(),
            admin_token,
            pushes: Default::default(),
            pulls: Default::default(),
            snapshot_dir: Default::default(),
            snapshot_writer: Default::default(),
            snapshot_error: Default::default(),
            lease: Default::default(),
            node,
        }
    }

    pub(super) fn check_size(&self, request: &impl Message, verb: &str) -> Result<()> {
        let len = request.encoded_len();
        if len > self.limits.max_message_bytes {
            return Err(PsError::TooLarge(format!(
                "{verb} request of {len} bytes is over this server's limit of {} bytes; \
                 send fewer keys per call",
                self.limits.max_message_bytes
            )));
        }
        Ok(())
    }

    /// Resolves and checks every slice of a pull or push.
    /// Whether a data call may be served: UNAVAILABLE past the lease ([`super::lease`]);
    /// PERMISSION_DENIED when the request's token may not name one of `matrices` or
    /// `counters` (those this server holds part of; others get their usual NOT_FOUND).
    fn allow<T>(
        &self,
        request: &Request<T>,
        matrices: &[u32],
        counters: &[u32],
    ) -> std::result::Result<(), Status> {
        self.lease.check()?;
        let access = Access::of(request);
        if access == Access::All {
            return Ok(());
        }
        let names = matrices
            .iter()
            .filter_map(|&id| self.parts.matrix_name(id).map(|n| ("matrix", n)))
            .chain(
                counters
                    .iter()
                    .filter_map(|&id| self.parts.counter_name(id).map(|n| ("counter", n))),
            );
        for (what, name) in names {
            access.check(what, &name).map_err(Status::from)?;
        }
        Ok(())
    }

    fn check_slices(
        &self,
        matrix_id: u32,
        value_type: i32,
        epoch: u64,
        slices: Vec<RowSlice>,
        with_values: bool,
    ) -> Result<Vec<Checked>> {
        let mut checked = Vec::with_capacity(slices.len());
        for s in slices {
            let part = self.parts.get(matrix_id, s.partition_id, epoch)?;
            let expected = part.matrix.value_type();
            if value_type != expected as i32 {
                return Err(PsError::InvalidArgument(format!(
                    "matrix '{}' holds {expected:?} values; the request carries {:?}",
                    part.matrix.name,
                    ValueType::try_from(value_type).unwrap_or(ValueType::Unspecified)
                )));
            }
            part.check_row(s.row)?;
            let keys = match s.keys.is_empty() {
                true => None,
                false => {
                    let keys = wire::decode_keys(&s.keys, "keys")?;
                    part.check_keys(&keys)?;
                    Some(keys)
                }
            };
            if with_values {
                let n = keys.as_ref().map_or(part.width(), |k| k.len() as u64);
                let size = value_size(expected) as u64;
                if n.checked_mul(size) != Some(s.values.len() as u64) {
                    return Err(PsError::InvalidArgument(format!(
                        "push to partition {} of matrix '{}': {} value bytes for {n} elements of \
                         {size} bytes",
                        part.id,
                        part.matrix.name,
                        s.values.len()
                    )));
                }
            }
            checked.push(Checked {
                part,
                row: s.row,
                keys,
                values: s.values,
            });
        }
        Ok(checked)
    }

    pub(super) fn pull_checked(&self, mut request: PullRequest) -> Result<PullReply> {
        self.check_size(&request, "pull")?;
        let caller = request.caller.unwrap_or_default();
        decode_slices(
            &mut request.slices,
            request.value_type,
            self.limits.max_message_bytes,
        )?;
        let checked = self.check_slices(
            request.matrix_id,
            request.value_type,
            caller.map_epoch,
            request.slices,
            false,
        )?;
        let mut versions: Vec<Ack> = Vec::new();
        let mut whole_rows = std::collections::HashSet::new();
        for c in checked.iter().filter(|c| c.keys.is_none()) {
            if !whole_rows.insert((c.part.id, c.row)) {
                return Err(PsError::InvalidArgument(format!(
                    "pull from matrix '{}': row {} of partition {} is named twice in one request",
                    c.part.matrix.name, c.row, c.part.id
                )));
            }
        }
        let limit = self.limits.max_message_bytes.saturating_mul(REPLY_FACTOR);
        let mut slices = Vec::with_capacity(checked.len());
        let mut reply_bytes = 0usize;
        for c in checked {
            let block = c.part.data.read();
            if !versions.iter().any(|a| a.partition_id == c.part.id) {
                versions.push(Ack {
                    partition_id: c.part.id,
                    version: c.part.applied.lock().version,
                    durable: 0,
                });
            }
            let (keys, values) = with_block!(&*block, b => b.pull(c.row, c.keys.as_deref()));
            // A small request naming one large slice many times must not buy a huge reply.
            reply_bytes += keys.len() + values.len();
            if reply_bytes > limit {
                return Err(PsError::TooLarge(format!(
                    "pull from matrix '{}': the reply would pass this server's limit of {limit} \
                     bytes ({REPLY_FACTOR} x --max-message-bytes); pull fewer rows or keys per \
                     call",
                    c.part.matrix.name
                )));
            }
            slices.push(RowSlice {
                partition_id: c.part.id,
                row: c.row,
                keys,
                values,
                codec: codec::RAW,
            });
        }
        if caller.step_worker != 0 {
            let seen = versions.iter().map(|a| a.version).max().unwrap_or(0);
            let worker = (caller.step_worker, caller.clock);
            self.pulls.record(request.matrix_id, worker, seen);
        }
        Ok(PullReply { slices, versions })
    }

    pub(super) fn push_checked(&self, mut request: PushRequest) -> Result<PushReply> {
        self.check_size(&request, "push")?;
        let caller = request.caller.unwrap_or_default();
        let (bytes, slices) = (payload(&request.slices), request.slices.len() as u64);
        let compressed_slices = decode_slices(
            &mut request.slices,
            request.value_type,
            self.limits.max_message_bytes,
        )?;
        let mut traffic = ClientPushes {
            worker_id: caller.worker_id,
            matrix_id: request.matrix_id,
            pushes: 1,
            bytes,
            raw_bytes: payload(&request.slices),
            slices,
            compressed_slices,
            ..Default::default()
        };
        let checked = self.check_slices(
            request.matrix_id,
            request.value_type,
            caller.map_epoch,
            request.slices,
            true,
        )?;
        traffic.elements = checked
            .iter()
            .map(|c| c.keys.as_ref().map_or(c.part.width(), |k| k.len() as u64))
            .sum();
        let gradients = match request.gradients {
            true => self.check_gradients(&checked)?,
            false => None,
        };
        let _reserved = self.reserve_push(&checked, gradients.as_ref())?;
        let group = gradients
            .as_ref()
            .map_or(1, |g| 1 + g.optimizer.state_rows() as u64);
        let mut acks = Vec::new();
        for (part, slices) in by_partition(checked) {
            let mut block = part.data.write();
            let mut applied = part.applied.lock();
            let staleness = staleness(&request.bases, part.id, applied.version);
            // The rows that may grow, measured before and after (dense rows never do).
            let rows: Vec<u64> = match part.matrix.storage() {
                StorageKind::Dense => Vec::new(),
                _ => slices.iter().flat_map(|c| c.row..c.row + group).collect(),
            };
            let before = with_block!(&*block, b => b.rows_bytes(&rows));
            if applied.admit(&caller) {
                for c in slices {
                    let keys = c.keys.as_deref();
                    match &gradients {
                        Some(g) => {
                            let factor = g.rule.factor(g.workers, staleness);
                            let optimizer = (&*g.optimizer, &g.params);
                            let mut step = |slot: &mut [f64], grad: f64| {
                                rule::apply_scaled(optimizer, factor, slot, grad)
                            };
                            let keys = keys.unwrap_or_default();
                            let group = (c.row, 1 + g.optimizer.state_rows());
                            with_block!(&mut *block, b => b.update(group, keys, &c.values, &mut step))?
                        }
                        None => with_block!(&mut *block, b => b.push(c.row, keys, &c.values))?,
                    }
                }
            }
            let after = with_block!(&*block, b => b.rows_bytes(&rows));
            record_bytes(&part.bytes, after as i64 - before as i64);
            acks.push(ack(part.id, &applied, &part.snapshotted.lock()));
        }
        self.pushes.record(&traffic);
        Ok(PushReply { acks })
    }

    /// Reserves what a push's slices may add to their rows: nothing for dense storage;
    /// for sparse, the keys the rows do not hold yet (see [`MemoryAccount`]).
    fn reserve_push(
        &self,
        checked: &[Checked],
        gradients: Option<&Gradients>,
    ) -> Result<Reservation<'_>> {
        let Some(first) = checked.first() else {
            return self.memory.reserve(&self.parts, Use::NOTHING, 0);
        };
        let matrix = &first.part.matrix;
        if matrix.storage() == StorageKind::Dense {
            return self.memory.reserve(&self.parts, Use::NOTHING, 0);
        }
        let keys: usize = (checked.iter())
            .map(|c| c.keys.as_ref().map_or(0, Vec::len))
            .sum();
        let what = format!("a push of {} slices and {keys} keys", checked.len());
        let write = Use {
            kind: "matrix",
            name: &matrix.name,
            what: &what,
        };
        self.memory.reserve_growth(&self.parts, write, |exact| {
            checked.iter().try_fold(Growth::default(), |sum, c| {
                let block = c.part.data.read();
                let keys = c.keys.as_deref();
                let grows = match gradients {
                    Some(g) => {
                        let group = (c.row, 1 + g.optimizer.state_rows());
                        let keys = keys.unwrap_or_default();
                        with_block!(&*block, b => b.update_growth(group, keys, exact))
                    }
                    None => {
                        with_block!(&*block, b => b.push_growth(c.row, keys, &c.values, exact))?
                    }
                };
                Ok(sum.and(grows))
            })
        })
    }

    /// What applies a gradient push: the optimizer and update rule of the matrix's training
    /// description, after checking every slice addresses the weights row of one of a model
    /// block's outputs: a model matrix is one group of `1 + state rows` rows per output (the
    /// weights, then the optimizer's state), every row kept together in each block. None for
    /// a push without slices.
    fn check_gradients(&self, checked: &[Checked]) -> Result<Option<Gradients>> {
        let Some(first) = checked.first() else {
            return Ok(None);
        };
        let m = &first.part.matrix;
        let described = m
            .training
            .as_ref()
            .and_then(|t| Some((t, t.optimizer.clone()?)));
        let Some((training, params)) = described else {
            return Err(PsError::InvalidArgument(format!(
                "matrix '{}' has no optimizer in its training description, so it takes no \
                 gradients; create it as a model (with an optimizer) or push values to add",
                m.name
            )));
        };
        let optimizer = self.optimizers.get(&params.name)?;
        let group = 1 + optimizer.state_rows() as u64;
        for c in checked {
            let whole = c.part.rows == (0..m.rows) && c.keys.is_some();
            if !m.rows.is_multiple_of(group) || !c.row.is_multiple_of(group) || !whole {
                return Err(PsError::InvalidArgument(format!(
                    "optimizer '{}' updates keys of the weights rows (0, {group}, ...) of a model \
                     matrix made of groups of {group} rows (weights + {} state rows) kept \
                     together in each block; matrix '{}' has {} rows, the push names row {}, \
                     partition {} holds rows {:?}",
                    params.name,
                    group - 1,
                    m.name,
                    m.rows,
                    c.row,
                    c.part.id,
                    c.part.rows
                )));
            }
        }
        Ok(Some(Gradients {
            optimizer,
            params,
            rule: rule::of(training.update()),
            workers: training.sync.as_ref().map_or(1, |s| s.workers),
        }))
    }

    /// Runs a PS function over every block of the request, after resolving and checking them
    /// all: a request with one bad block changes nothing, so a client may resend it after a
    /// refresh without applying any block twice. Each block is named once, so a request's work
    /// is bounded by the partitions this server holds.
    fn psf_checked(&self, request: PsfRequest) -> Result<PsfReply> {
        self.check_size(&request, "PS function")?;
        let function = self.psfs.get(&request.name)?;
        let epoch = request.caller.map_or(0, |c| c.map_epoch);
        let mut seen = std::collections::HashSet::with_capacity(request.blocks.len());
        let mut resolved = Vec::with_capacity(request.blocks.len());
        for block in &request.blocks {
            if !seen.insert(&block.partition_ids) {
                return Err(PsError::InvalidArgument(format!(
                    "PS function '{}': block {:?} is named twice in one request",
                    request.name, block.partition_ids
                )));
            }
            if block.partition_ids.len() != request.operands.len() {
                return Err(PsError::InvalidArgument(format!(
                    "PS function '{}': a block names {} partitions for {} operands",
                    request.name,
                    block.partition_ids.len(),
                    request.operands.len()
                )));
            }
            let mut operands: Vec<(Arc<Partition>, u64)> =
                Vec::with_capacity(request.operands.len());
            for (op, &pid) in request.operands.iter().zip(&block.partition_ids) {
                let part = self.parts.get(op.matrix_id, pid, epoch)?;
                part.check_row(op.row)?;
                if let Some((first, _)) = operands.first()
                    && part.cols != first.cols
                {
                    return Err(PsError::InvalidArgument(format!(
                        "PS function '{}': operands '{}' and '{}' are partitioned differently",
                        request.name, first.matrix.name, part.matrix.name
                    )));
                }
                operands.push((part, op.row));
            }
            resolved.push(operands);
        }
        let _reserved = self.reserve_psf(&request.name, &resolved)?;
        let measured = sparse_rows(&resolved);
        let mut results = Vec::with_capacity(resolved.len());
        let mut wrote = false;
        let matrices: Vec<u32> = request.operands.iter().map(|o| o.matrix_id).collect();
        let mut outcome = Ok(());
        for operands in resolved {
            let ctx = PsfContext::new(&request.name, operands, &request.args);
            let values = function.apply(&ctx);
            wrote |= ctx.wrote();
            match values {
                Ok(values) => results.push(PsfValues { values }),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        for (part, row, before) in measured {
            let after = with_block!(&*part.data.read(), b => b.rows_bytes(&[row]));
            record_bytes(&part.bytes, after as i64 - before as i64);
        }
        if wrote {
            self.write_snapshots(&matrices)?;
        }
        outcome?;
        Ok(PsfReply {
            results,
            merge: function.merge() as i32,
        })
    }

    /// Reserves what a PS function over `resolved` blocks may take: a sparse row it writes
    /// gains at most the keys its block's operands hold together, and its copies of rows
    /// (8 bytes a dense element, 24 a sparse key) are scratch held while it runs.
    fn reserve_psf(
        &self,
        name: &str,
        resolved: &[Vec<(Arc<Partition>, u64)>],
    ) -> Result<Reservation<'_>> {
        let Some((first, _)) = resolved.first().and_then(|operands| operands.first()) else {
            return self.memory.reserve(&self.parts, Use::NOTHING, 0);
        };
        let mut bytes = 0u64;
        for operands in resolved {
            let rows: Vec<(u64, bool)> = (operands.iter())
                .map(|(p, row)| {
                    let block = p.data.read();
                    with_block!(&*block, b => {
                        let view = b.row_ref(*row);
                        (view.stored(), view.is_dense())
                    })
                })
                .collect();
            let keys: u64 = rows.iter().map(|r| r.0).sum();
            let scratch: u64 = (rows.iter())
                .map(|&(n, dense)| n * if dense { 8 } else { 24 })
                .sum();
            let grows = (operands.iter().zip(&rows))
                .filter(|(_, (_, dense))| !dense)
                .map(|((p, row), _)| {
                    let block = p.data.read();
                    with_block!(&*block, b => b.write_growth(*row, keys as usize))
                })
                .fold(Growth::default(), Growth::and);
            bytes = bytes.saturating_add(scratch).saturating_add(grows.bytes());
        }
        let what = format!("PS function '{name}' over {} blocks", resolved.len());
        let write = Use {
            kind: "matrix",
            name: &first.matrix.name,
            what: &what,
        };
        self.memory.reserve(&self.parts, write, bytes)
    }

    /// Bytes the new partitions `ids` of `meta` take at once: their dense storage (sparse
    /// partitions start empty and grow through pushes, each reserving its growth).
    fn created_bytes(meta: &MatrixMeta, ids: &[u32]) -> u64 {
        if meta.storage() != StorageKind::Dense {
            return 0;
        }
        let element = value_size(meta.value_type()) as u64;
        ids.iter()
            .filter_map(|&pid| meta.partitions.get(pid as usize))
            .try_fold(0u64, |sum, p| {
                let cells = (p.row_end.checked_sub(p.row_start)?)
                    .checked_mul(p.col_end.checked_sub(p.col_start)?)?;
                sum.checked_add(cells.checked_mul(element)?)
            })
            .unwrap_or(u64::MAX)
    }

    pub(super) fn create_checked(
        &self,
        request: CreatePartitionsRequest,
    ) -> Result<CreatePartitionsReply> {
        self.parts.observe_epoch(request.epoch);
        let meta = Arc::new(request.matrix.ok_or_else(|| {
            PsError::InvalidArgument("create partitions: the matrix is missing".into())
        })?);
        if let Some(pid) = request
            .partition_ids
            .iter()
            .find(|&&pid| meta.partitions.get(pid as usize).is_none())
        {
            return Err(PsError::InvalidArgument(format!(
                "matrix '{}' has no partition {pid}",
                meta.name
            )));
        }
        let write = Use {
            kind: "matrix",
            name: &meta.name,
            what: if request.restore {
                "restoring its partitions"
            } else {
                "creating its partitions"
            },
        };
        let created = Self::created_bytes(&meta, &request.partition_ids);
        let reserved = match request.restore {
            // A restore's size is known once read; it is reserved before it is hosted.
            true => None,
            false => Some(self.memory.reserve(&self.parts, write, created)?),
        };
        let mut parts = Vec::with_capacity(request.partition_ids.len());
        for &pid in &request.partition_ids {
            parts.push(match request.restore {
                true => self.restore_partition(&meta, pid)?,
                false => self.new_partition(&meta, pid)?,
            });
        }
        let read: u64 = parts.iter().map(|p| p.bytes.load(Relaxed)).sum();
        let _reserved = match reserved {
            Some(reserved) => reserved,
            None => self.memory.reserve(&self.parts, write, read)?,
        };
        let restored = match request.restore {
            true => parts
                .iter()
                .map(|p| ack(p.id, &p.applied.lock(), &p.snapshotted.lock()))
                .collect(),
            false => Vec::new(),
        };
        self.parts.insert(parts);
        if !request.restore {
            // A partition always has a snapshot to restore from, even before its first change.
            self.write_snapshots(&[meta.id])?;
        }
        Ok(CreatePartitionsReply { restored })
    }

    /// Partition `pid` of `meta`, zeroed.
    fn new_partition(&self, meta: &Arc<MatrixMeta>, pid: u32) -> Result<Partition> {
        let p = &meta.partitions[pid as usize];
        let (rows, cols) = (p.row_start..p.row_end, p.col_start..p.col_end);
        let block =
            AnyBlock::new(meta.value_type(), rows, cols, meta.storage()).map_err(|e| match e {
                PsError::TooLarge(why) => {
                    PsError::TooLarge(format!("partition {pid} of matrix '{}': {why}", meta.name))
                }
                e => e,
            })?;
        Ok(Partition::new(
            meta.clone(),
            pid,
            block,
            Default::default(),
            Default::default(),
        ))
    }
}

/// Every sparse (partition, row) of `resolved` blocks, once, with the bytes it holds now:
/// what a PS function may grow, measured again once it ran.
fn sparse_rows(resolved: &[Vec<(Arc<Partition>, u64)>]) -> Vec<(Arc<Partition>, u64, u64)> {
    let mut rows: Vec<(Arc<Partition>, u64, u64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (part, row) in resolved.iter().flatten() {
        let sparse = part.matrix.storage() != StorageKind::Dense;
        if sparse && seen.insert((Arc::as_ptr(part), *row)) {
            let bytes = with_block!(&*part.data.read(), b => b.rows_bytes(&[*row]));
            rows.push((part.clone(), *row, bytes));
        }
    }
    rows
}

/// How many changes partition `id` applied (at `version`) since the version `bases` says an
/// update was computed from; 0 when it names none.
fn staleness(bases: &[Ack], id: u32, version: u64) -> u64 {
    bases
        .iter()
        .find(|b| b.partition_id == id)
        .map_or(0, |b| version.saturating_sub(b.version))
}

/// How a gradient push is applied: its matrix's optimizer with its parameters, and its update
/// rule, which scales the change (by the model's `workers` or the push's staleness).
struct Gradients {
    optimizer: Arc<dyn Optimizer>,
    params: OptimizerParams,
    rule: &'static dyn Rule,
    workers: u32,
}

/// `stats` with the partition's version, duplicates, replays and newest snapshot.
fn with_log(stats: PartitionStats, applied: &Applied, snapshotted: &Snapshotted) -> PartitionStats {
    PartitionStats {
        version: applied.version,
        duplicates: applied.duplicates,
        below_window: applied.below_window,
        replayed: applied.replayed,
        durable: snapshotted.version,
        snapshot_age_ms: snapshotted
            .at
            .map_or(0, |at| at.elapsed().as_millis() as u64),
        snapshot_bytes: snapshotted.bytes,
        snapshot_pause_us: snapshotted.pause.as_micros() as u64,
        snapshots: snapshotted.count,
        ..stats
    }
}

/// Checked slices grouped by partition, in first-seen order: a change is admitted (or
/// refused as a duplicate) once per partition, whatever number of its rows it touches.
fn by_partition(checked: Vec<Checked>) -> Vec<(Arc<Partition>, Vec<Checked>)> {
    let mut groups: Vec<(Arc<Partition>, Vec<Checked>)> = Vec::new();
    for c in checked {
        match groups.iter_mut().find(|(p, _)| Arc::ptr_eq(p, &c.part)) {
            Some((_, group)) => group.push(c),
            None => groups.push((c.part.clone(), vec![c])),
        }
    }
    groups
}

fn answer<T>(result: Result<T>) -> std::result::Result<Response<T>, Status> {
    result.map(Response::new).map_err(Status::from)
}

#[tonic::async_trait]
impl Server for ServerService {
    async fn create_partitions(
        &self,
        request: Request<CreatePartitionsRequest>,
    ) -> std::result::Result<Response<CreatePartitionsReply>, Status> {
        admin::check(&request, &self.admin_token, "CreatePartitions")?;
        answer(self.create_checked(request.into_inner()))
    }

    async fn drop_partitions(
        &self,
        request: Request<DropPartitionsRequest>,
    ) -> std::result::Result<Response<DropPartitionsReply>, Status> {
        admin::check(&request, &self.admin_token, "DropPartitions")?;
        let request = request.into_inner();
        self.parts.observe_epoch(request.epoch);
        self.parts.remove_matrix(request.matrix_id);
        Ok(Response::new(DropPartitionsReply {}))
    }

    async fn write_snapshot(
        &self,
        request: Request<WriteSnapshotRequest>,
    ) -> std::result::Result<Response<SnapshotReply>, Status> {
        admin::check(&request, &self.admin_token, "WriteSnapshot")?;
        answer(self.write_snapshots(&request.into_inner().ids))
    }

    async fn pull(
        &self,
        request: Request<PullRequest>,
    ) -> std::result::Result<Response<PullReply>, Status> {
        self.allow(&request, &[request.get_ref().matrix_id], &[])?;
        answer(self.pull_checked(request.into_inner()))
    }

    async fn push(
        &self,
        request: Request<PushRequest>,
    ) -> std::result::Result<Response<PushReply>, Status> {
        self.allow(&request, &[request.get_ref().matrix_id], &[])?;
        answer(self.push_checked(request.into_inner()))
    }

    async fn call_psf(
        &self,
        request: Request<PsfRequest>,
    ) -> std::result::Result<Response<PsfReply>, Status> {
        let operands: Vec<u32> = request
            .get_ref()
            .operands
            .iter()
            .map(|o| o.matrix_id)
            .collect();
        self.allow(&request, &operands, &[])?;
        answer(self.psf_checked(request.into_inner()))
    }

    async fn counter_admin(
        &self,
        request: Request<CounterAdminRequest>,
    ) -> std::result::Result<Response<CounterAdminReply>, Status> {
        admin::check(&request, &self.admin_token, "CounterAdmin")?;
        answer(self.counter_admin_checked(request.into_inner()))
    }

    async fn counter_increase(
        &self,
        request: Request<CounterIncreaseRequest>,
    ) -> std::result::Result<Response<CounterIncreaseReply>, Status> {
        self.allow(&request, &[], &[request.get_ref().counter_id])?;
        let request = request.into_inner();
        answer(
            self.check_size(&request, "counter increase")
                .and_then(|()| self.counter_increase_checked(request)),
        )
    }

    async fn counter_get(
        &self,
        request: Request<CounterGetRequest>,
    ) -> std::result::Result<Response<CounterGetReply>, Status> {
        self.allow(&request, &[], &[request.get_ref().counter_id])?;
        let request = request.into_inner();
        answer(
            self.check_size(&request, "counter get")
                .and_then(|()| self.counter_get_checked(request)),
        )
    }

    /// The master's view of this server. It needs the admin token too, so the master's probe
    /// at registration proves the process at the address is the one registering.
    async fn stats(
        &self,
        request: Request<StatsRequest>,
    ) -> std::result::Result<Response<StatsReply>, Status> {
        admin::check(&request, &self.admin_token, "Stats")?;
        let with_pulls = request.get_ref().pulls;
        let partitions = self
            .parts
            .all()
            .into_iter()
            .map(|p| {
                let (elements, bytes) = with_block!(&*p.data.read(), b => b.usage());
                let stats = PartitionStats {
                    matrix_id: p.matrix.id,
                    partition_id: p.id,
                    elements,
                    bytes,
                    ..Default::default()
                };
                with_log(stats, &p.applied.lock(), &p.snapshotted.lock())
            })
            .chain(self.parts.all_counters().into_iter().map(|c| {
                let (elements, bytes) = c.data.read().usage();
                let stats = PartitionStats {
                    matrix_id: c.counter.id,
                    partition_id: c.id,
                    elements,
                    bytes,
                    ..Default::default()
                };
                with_log(stats, &c.applied.lock(), &c.snapshotted.lock())
            }))
            .collect();
        Ok(Response::new(StatsReply {
            server_id: self.server_id.load(std::sync::atomic::Ordering::Relaxed),
            partitions,
            pushes: self.pushes.snapshot(),
            pulls: match with_pulls {
                true => self.pulls.snapshot(),
                false => Vec::new(),
            },
            snapshot_error: self.snapshot_error.lock().clone().unwrap_or_default(),
            seen_epoch: self.parts.seen_epoch(),
        }))
    }
}
