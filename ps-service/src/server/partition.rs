//! The partitions one server hosts, each behind its own lock so pushes to different
//! partitions run in parallel and pushes to the same partition never lose an update.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use angel_proto::{CounterMeta, MatrixMeta, PsError, Result};
use parking_lot::{Mutex, RwLock};

use super::applied::{Applied, Snapshotted};
use crate::blocks::{AnyBlock, CounterBlock};

/// One hosted partition.
#[derive(Debug)]
pub struct Partition {
    /// The matrix it belongs to (shared by its partitions on this server).
    pub matrix: Arc<MatrixMeta>,
    /// Partition id within the matrix.
    pub id: u32,
    /// Rows of the block.
    pub rows: Range<u64>,
    /// Columns of the block.
    pub cols: Range<u64>,
    /// The data.
    pub data: RwLock<AnyBlock>,
    /// Version and marks; changed only under `data`'s write lock.
    pub applied: Mutex<Applied>,
    /// The newest committed snapshot.
    pub snapshotted: Mutex<Snapshotted>,
    /// Bytes its block holds, as last measured: what the memory account sums.
    pub bytes: AtomicU64,
}

impl Partition {
    /// A partition holding `block`, at `applied`, whose snapshot holds `snapshotted`.
    pub fn new(
        matrix: Arc<MatrixMeta>,
        id: u32,
        block: AnyBlock,
        applied: Applied,
        snapshotted: Snapshotted,
    ) -> Self {
        let p = &matrix.partitions[id as usize];
        let bytes = crate::with_block!(&block, b => b.usage()).1;
        Partition {
            bytes: AtomicU64::new(bytes),
            rows: p.row_start..p.row_end,
            cols: p.col_start..p.col_end,
            matrix: matrix.clone(),
            id,
            data: RwLock::new(block),
            applied: Mutex::new(applied),
            snapshotted: Mutex::new(snapshotted),
        }
    }

    /// OUT_OF_RANGE unless `row` is in this block.
    pub fn check_row(&self, row: u64) -> Result<()> {
        if self.rows.contains(&row) {
            return Ok(());
        }
        Err(PsError::OutOfRange(format!(
            "row {row} is out of range for partition {} of matrix '{}' (rows {:?} of {})",
            self.id, self.matrix.name, self.rows, self.matrix.rows
        )))
    }

    /// OUT_OF_RANGE naming the first key outside this block's columns.
    pub fn check_keys(&self, keys: &[u64]) -> Result<()> {
        match keys.iter().find(|k| !self.cols.contains(k)) {
            None => Ok(()),
            Some(k) => Err(PsError::OutOfRange(format!(
                "key {k} is out of range for partition {} of matrix '{}' (columns {:?} of {})",
                self.id, self.matrix.name, self.cols, self.matrix.cols
            ))),
        }
    }

    /// Block width in columns.
    pub fn width(&self) -> u64 {
        self.cols.end - self.cols.start
    }
}

/// One hosted partition of a counter: the keys whose hash falls in `hashes`.
#[derive(Debug)]
pub struct CounterPart {
    /// The counter it belongs to.
    pub counter: Arc<CounterMeta>,
    /// Partition id within the counter's key space.
    pub id: u32,
    /// Hash range of its keys.
    pub hashes: Range<u64>,
    /// The keys.
    pub data: RwLock<CounterBlock>,
    /// Version and marks; changed only under `data`'s write lock.
    pub applied: Mutex<Applied>,
    /// The newest committed snapshot.
    pub snapshotted: Mutex<Snapshotted>,
    /// Bytes its block holds, as last measured: what the memory account sums.
    pub bytes: AtomicU64,
}

impl CounterPart {
    /// Partition `id` of `counter`, over `hashes`, holding `block`, at `applied`, whose
    /// snapshot holds `snapshotted`.
    pub fn new(
        counter: Arc<CounterMeta>,
        (id, hashes): (u32, Range<u64>),
        block: CounterBlock,
        applied: Applied,
        snapshotted: Snapshotted,
    ) -> Self {
        CounterPart {
            counter,
            id,
            hashes,
            bytes: AtomicU64::new(block.usage().1),
            data: RwLock::new(block),
            applied: Mutex::new(applied),
            snapshotted: Mutex::new(snapshotted),
        }
    }
}

/// Adds `grew` bytes (negative: freed) to what `bytes` records.
pub fn record_bytes(bytes: &AtomicU64, grew: i64) {
    match grew >= 0 {
        true => bytes.fetch_add(grew as u64, Ordering::Relaxed),
        false => bytes.fetch_sub(grew.unsigned_abs(), Ordering::Relaxed),
    };
}

/// Everything a server hosts, by (matrix or counter id, partition id).
#[derive(Debug, Default)]
pub struct Partitions {
    parts: RwLock<HashMap<(u32, u32), Arc<Partition>>>,
    counters: RwLock<HashMap<(u32, u32), Arc<CounterPart>>>,
    /// Newest partition-map epoch this server has seen.
    epoch: AtomicU64,
    /// The epoch this server had seen when the master declared it dead and it dropped its
    /// partitions (0: never): callers routing by a map that old are sent to refresh it.
    cleared_at: AtomicU64,
}

impl Partitions {
    /// The name of matrix `id`, if this server holds a partition of it.
    pub fn matrix_name(&self, id: u32) -> Option<String> {
        let parts = self.parts.read();
        let mut of_matrix = parts.iter().filter(|((m, _), _)| *m == id);
        of_matrix.next().map(|(_, p)| p.matrix.name.clone())
    }

    /// The name of counter `id`, if this server holds a partition of it.
    pub fn counter_name(&self, id: u32) -> Option<String> {
        let counters = self.counters.read();
        let mut of_counter = counters.iter().filter(|((c, _), _)| *c == id);
        of_counter.next().map(|(_, p)| p.counter.name.clone())
    }

    /// The newest map epoch seen from the master.
    pub fn seen_epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// How many partitions, of matrices and counters, this server holds.
    pub fn held(&self) -> u32 {
        (self.parts.read().len() + self.counters.read().len()) as u32
    }

    /// Records a map epoch seen from the master.
    pub fn observe_epoch(&self, epoch: u64) {
        self.epoch.fetch_max(epoch, Ordering::Relaxed);
    }

    /// The partition, or FAILED_PRECONDITION telling the caller to refresh its map.
    pub fn get(
        &self,
        matrix_id: u32,
        partition_id: u32,
        caller_epoch: u64,
    ) -> Result<Arc<Partition>> {
        let found = self.parts.read().get(&(matrix_id, partition_id)).cloned();
        found.ok_or_else(|| self.stale("matrix", matrix_id, partition_id, caller_epoch))
    }

    /// The counter partition, or FAILED_PRECONDITION telling the caller to refresh its map.
    pub fn counter(
        &self,
        counter_id: u32,
        partition_id: u32,
        caller_epoch: u64,
    ) -> Result<Arc<CounterPart>> {
        let found = self
            .counters
            .read()
            .get(&(counter_id, partition_id))
            .cloned();
        found.ok_or_else(|| self.stale("counter", counter_id, partition_id, caller_epoch))
    }

    /// Why a partition is not here: a caller whose map is older than what this server has
    /// seen should refresh it (STALE_MAP, which clients retry); for a caller as up to date as
    /// the server, the partition does not exist (NOT_FOUND).
    fn stale(&self, kind: &str, id: u32, partition_id: u32, caller_epoch: u64) -> PsError {
        let epoch = self.epoch.load(Ordering::Relaxed);
        let moved = caller_epoch <= self.cleared_at.load(Ordering::Relaxed);
        match caller_epoch < epoch || moved {
            true => PsError::StaleMap(format!(
                "partition {partition_id} of {kind} {id} is not on this server (caller map \
                 epoch {caller_epoch}, server epoch {epoch}); refresh the partition map"
            )),
            false => PsError::NotFound(format!(
                "{kind} {id} has no partition {partition_id} on this server (map epoch {epoch})"
            )),
        }
    }

    /// Adds partitions of a new counter.
    pub fn insert_counter(&self, parts: Vec<CounterPart>) {
        let mut map = self.counters.write();
        for p in parts {
            map.insert((p.counter.id, p.id), Arc::new(p));
        }
    }

    /// Removes every partition of counter `counter_id`.
    pub fn remove_counter(&self, counter_id: u32) {
        self.counters.write().retain(|(c, _), _| *c != counter_id);
    }

    /// Every hosted counter partition.
    pub fn all_counters(&self) -> Vec<Arc<CounterPart>> {
        self.counters.read().values().cloned().collect()
    }

    /// Drops everything: the master gave this server's partitions to others.
    pub fn clear(&self) {
        let epoch = self.epoch.load(Ordering::Relaxed);
        self.cleared_at.fetch_max(epoch.max(1), Ordering::Relaxed);
        self.parts.write().clear();
        self.counters.write().clear();
    }

    /// Adds partitions of a new matrix.
    pub fn insert(&self, parts: Vec<Partition>) {
        let mut map = self.parts.write();
        for p in parts {
            map.insert((p.matrix.id, p.id), Arc::new(p));
        }
    }

    /// Removes every partition of `matrix_id`.
    pub fn remove_matrix(&self, matrix_id: u32) {
        self.parts.write().retain(|(m, _), _| *m != matrix_id);
    }

    /// Every hosted partition.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.parts.read().values().cloned().collect()
    }

    /// Bytes of partition data held: in all, and by the matrices and counters of namespace
    /// `ns` (or of no namespace).
    pub fn bytes_held(&self, ns: Option<&str>) -> (u64, u64) {
        let ours = |name: &str| angel_proto::namespace::split(name).0 == ns;
        let matrices = self.parts.read();
        let counters = self.counters.read();
        let held = (matrices.values()).map(|p| (&p.matrix.name, &p.bytes));
        let held = held.chain(counters.values().map(|p| (&p.counter.name, &p.bytes)));
        held.fold((0, 0), |(all, of_ns), (name, bytes)| {
            let b = bytes.load(Ordering::Relaxed);
            (all + b, of_ns + if ours(name) { b } else { 0 })
        })
    }
}
