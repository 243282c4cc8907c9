//! The server's side of snapshots: writing the partitions it hosts (periodically, on the
//! master's request, after creating them, and after a PS function changed them) and
//! restoring partitions from the newest snapshot when the master hands it a dead server's.
//!
//! A partition's rows are copied under its read lock, so pulls go on and pushes wait only for
//! the copy (the pause the status reports); encoding and writing happen after.

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_proto::{
    CounterMeta, Durable, MatrixMeta, PartitionSnapshot, PsError, Result, SnapshotReply,
    StorageKind,
};

use super::applied::{Applied, Snapshotted};
use super::marks::Marks;
use super::partition::{CounterPart, Partition};
use super::service::ServerService;
use crate::blocks::{AnyBlock, Block, CounterBlock};
use crate::snapshot::SnapshotDir;
use crate::with_block;

/// A partition copied for its snapshot, and how long the copy held off changes.
struct Image {
    id: u32,
    snapshot: PartitionSnapshot,
    pause: Duration,
}

impl ServerService {
    /// The snapshot directory, or None when the service runs without one.
    pub(super) fn snapshot_dir(&self) -> Option<SnapshotDir> {
        self.snapshot_dir.read().clone()
    }

    /// Writes a snapshot of every hosted partition of `ids` (all when empty) that changed
    /// since its last one. Blocking; one writer at a time.
    pub fn write_snapshots(&self, ids: &[u32]) -> Result<SnapshotReply> {
        let Some(dir) = self.snapshot_dir() else {
            return Ok(SnapshotReply::default());
        };
        let _one_writer = self.snapshot_writer.lock();
        let started = Instant::now();
        let wanted = |id: u32| ids.is_empty() || ids.contains(&id);
        let mut reply = SnapshotReply::default();
        let mut record = |image: Image, snapshotted: &parking_lot::Mutex<Snapshotted>| {
            // Checked right before each write: a server that woke from a freeze must not write
            // its stale copy over the snapshots of the partition's new owner.
            self.lease.check()?;
            let bytes = dir.write_partition(image.id, &image.snapshot)?;
            let mut snapshotted = snapshotted.lock();
            *snapshotted = Snapshotted {
                version: image.snapshot.version,
                at: Some(Instant::now()),
                bytes,
                pause: image.pause,
                count: snapshotted.count + 1,
            };
            reply.partitions += 1;
            reply.bytes += bytes;
            reply.max_pause_us = reply.max_pause_us.max(image.pause.as_micros() as u64);
            Ok::<_, PsError>(())
        };
        for part in self.parts.all() {
            if wanted(part.matrix.id) && needs_snapshot(&part.applied, &part.snapshotted) {
                record(matrix_image(&part), &part.snapshotted)?;
            }
        }
        for part in self.parts.all_counters() {
            if wanted(part.counter.id) && needs_snapshot(&part.applied, &part.snapshotted) {
                record(counter_image(&part)?, &part.snapshotted)?;
            }
        }
        if !ids.is_empty() {
            reply.durable = self.durable(ids);
        }
        reply.millis = started.elapsed().as_millis() as u64;
        if reply.partitions > 0 {
            tracing::debug!(
                partitions = reply.partitions,
                bytes = reply.bytes,
                millis = reply.millis,
                "snapshot written"
            );
        }
        Ok(reply)
    }

    /// What the newest snapshot of each hosted partition of `ids` holds.
    fn durable(&self, ids: &[u32]) -> Vec<Durable> {
        let matrices = self.parts.all().into_iter().map(|p| {
            let version = p.snapshotted.lock().version;
            (p.matrix.id, p.id, version)
        });
        let counters = self.parts.all_counters().into_iter().map(|p| {
            let version = p.snapshotted.lock().version;
            (p.counter.id, p.id, version)
        });
        matrices
            .chain(counters)
            .filter(|(id, _, _)| ids.contains(id))
            .map(|(id, partition_id, version)| Durable {
                id,
                partition_id,
                version,
            })
            .collect()
    }

    /// Partition `pid` of `meta`, loaded from its newest snapshot. Blocking.
    pub(super) fn restore_partition(&self, meta: &Arc<MatrixMeta>, pid: u32) -> Result<Partition> {
        let (dir, snapshot) = self.read_snapshot(meta.id, pid, &meta.name)?;
        let found = snapshot.matrix.as_ref();
        let p = &meta.partitions[pid as usize];
        let same = found.is_some_and(|m| {
            let q = m.partitions.get(pid as usize);
            snapshot.partition_id == pid
                && m.id == meta.id
                && m.name == meta.name
                && (m.rows, m.cols, m.value_type, m.storage)
                    == (meta.rows, meta.cols, meta.value_type, meta.storage)
                && q.is_some_and(|q| {
                    (q.row_start, q.row_end, q.col_start, q.col_end)
                        == (p.row_start, p.row_end, p.col_start, p.col_end)
                })
        });
        if !same {
            return Err(mismatch(&dir, meta.id, pid, &meta.name));
        }
        let (rows, cols) = (p.row_start..p.row_end, p.col_start..p.col_end);
        let storage = meta.storage();
        let block = restore_block(meta, rows, cols, storage, &snapshot)
            .map_err(|e| in_snapshot(&dir, meta.id, pid, e))?;
        let (applied, snapshotted) = restored_log(&snapshot, &dir, meta.id, pid)?;
        Ok(Partition::new(
            meta.clone(),
            pid,
            block,
            applied,
            snapshotted,
        ))
    }

    /// Counter partition `pid` of `meta`, loaded from its newest snapshot. Blocking.
    pub(super) fn restore_counter(
        &self,
        meta: &Arc<CounterMeta>,
        pid: u32,
        hashes: std::ops::Range<u64>,
    ) -> Result<CounterPart> {
        let (dir, snapshot) = self.read_snapshot(meta.id, pid, &meta.name)?;
        let same = snapshot.partition_id == pid
            && snapshot
                .counter
                .as_ref()
                .is_some_and(|c| c.id == meta.id && c.name == meta.name);
        let data = snapshot.counter_data.as_ref().filter(|_| same);
        let data = data.ok_or_else(|| mismatch(&dir, meta.id, pid, &meta.name))?;
        let block =
            CounterBlock::from_snapshot(data).map_err(|e| in_snapshot(&dir, meta.id, pid, e))?;
        let (applied, snapshotted) = restored_log(&snapshot, &dir, meta.id, pid)?;
        Ok(CounterPart::new(
            meta.clone(),
            (pid, hashes),
            block,
            applied,
            snapshotted,
        ))
    }

    fn read_snapshot(&self, id: u32, pid: u32, name: &str) -> Result<(String, PartitionSnapshot)> {
        // This server's want, not the snapshot's: the master tries another server.
        let dir = self.snapshot_dir().ok_or_else(|| {
            PsError::Unavailable(format!(
                "partition {pid} of '{name}' cannot be restored here: this server has no \
                 snapshot directory (yet: the master gives it one at registration)"
            ))
        })?;
        // A partition larger than the whole memory budget could never be hosted here.
        match dir.read_partition(id, pid, self.memory.budget()) {
            Ok(snapshot) => Ok((dir.url(), snapshot)),
            Err(PsError::NotFound(why)) => Err(PsError::DataLoss(format!(
                "partition {pid} of '{name}' has no snapshot to restore ({why})"
            ))),
            Err(e) => Err(e),
        }
    }
}

fn needs_snapshot(
    applied: &parking_lot::Mutex<Applied>,
    snapshotted: &parking_lot::Mutex<Snapshotted>,
) -> bool {
    let version = applied.lock().version;
    let s = snapshotted.lock();
    s.at.is_none() || s.version < version
}

fn matrix_image(part: &Partition) -> Image {
    let started = Instant::now();
    let block = part.data.read();
    let rows = with_block!(&*block, b => b.to_rows());
    let applied = part.applied.lock();
    let (version, marks) = (applied.version, applied.marks.to_proto());
    drop((applied, block));
    Image {
        id: part.matrix.id,
        pause: started.elapsed(),
        snapshot: PartitionSnapshot {
            matrix: Some((*part.matrix).clone()),
            partition_id: part.id,
            version,
            rows,
            marks,
            ..Default::default()
        },
    }
}

fn counter_image(part: &CounterPart) -> Result<Image> {
    let started = Instant::now();
    let block = part.data.read();
    let data = block.to_snapshot()?;
    let applied = part.applied.lock();
    let (version, marks) = (applied.version, applied.marks.to_proto());
    drop((applied, block));
    Ok(Image {
        id: part.counter.id,
        pause: started.elapsed(),
        snapshot: PartitionSnapshot {
            counter: Some((*part.counter).clone()),
            partition_id: part.id,
            version,
            counter_data: Some(data),
            marks,
            ..Default::default()
        },
    })
}

fn restore_block(
    meta: &MatrixMeta,
    rows: std::ops::Range<u64>,
    cols: std::ops::Range<u64>,
    storage: StorageKind,
    snapshot: &PartitionSnapshot,
) -> Result<AnyBlock> {
    use angel_proto::ValueType as V;
    let r = &snapshot.rows;
    Ok(match meta.value_type() {
        V::F32 => AnyBlock::F32(Block::from_rows(rows, cols, storage, r)?),
        V::F64 => AnyBlock::F64(Block::from_rows(rows, cols, storage, r)?),
        V::I64 => AnyBlock::I64(Block::from_rows(rows, cols, storage, r)?),
        V::Unspecified => return Err(PsError::DataLoss("value type is unspecified".into())),
    })
}

/// Version and marks as the snapshot holds them; the snapshot itself is the durable one.
fn restored_log(
    snapshot: &PartitionSnapshot,
    dir: &str,
    id: u32,
    pid: u32,
) -> Result<(Applied, Snapshotted)> {
    let marks = Marks::from_proto(&snapshot.marks).map_err(|e| in_snapshot(dir, id, pid, e))?;
    let applied = Applied {
        version: snapshot.version,
        marks,
        ..Default::default()
    };
    let snapshotted = Snapshotted {
        version: snapshot.version,
        at: Some(Instant::now()),
        ..Default::default()
    };
    Ok((applied, snapshotted))
}

fn mismatch(dir: &str, id: u32, pid: u32, name: &str) -> PsError {
    PsError::DataLoss(format!(
        "the snapshot of partition {pid} of {id} in {dir} is not of partition {pid} of \
         '{name}' as the master knows it (another service's snapshot directory, or a file \
         copied from another partition?)"
    ))
}

fn in_snapshot(dir: &str, id: u32, pid: u32, e: PsError) -> PsError {
    PsError::DataLoss(format!(
        "the snapshot of partition {pid} of {id} in {dir}/partitions/{id}/{pid}: {e}"
    ))
}

#[cfg(test)]
mod tests {
    use angel_proto::{
        Caller, CreatePartitionsRequest, Partition as Block, PullRequest, PushRequest, RowSlice,
        ValueType, wire,
    };

    use super::*;
    use crate::server::Functions;

    /// A server's service, not on the network: restore and deduplication are the service's,
    /// whatever carries the requests.
    fn service(dir: Option<&std::path::Path>) -> ServerService {
        ServerService {
            limits: crate::server::Limits {
                max_message_bytes: 1 << 20,
                ..Default::default()
            },
            snapshot_dir: parking_lot::RwLock::new(
                dir.map(|d| SnapshotDir::parse(&d.display().to_string()).unwrap()),
            ),
            ..ServerService::new(Functions::default(), String::new(), "server@test".into())
        }
    }

    /// A sparse f32 matrix of 2 rows x 100 columns in two blocks of 50 columns.
    fn matrix() -> MatrixMeta {
        let block = |id, cols: std::ops::Range<u64>| Block {
            id,
            row_start: 0,
            row_end: 2,
            col_start: cols.start,
            col_end: cols.end,
            ..Default::default()
        };
        MatrixMeta {
            id: 7,
            name: "w".into(),
            rows: 2,
            cols: 100,
            value_type: ValueType::F32 as i32,
            storage: StorageKind::Sparse as i32,
            partitions: vec![block(0, 0..50), block(1, 50..100)],
            ..Default::default()
        }
    }

    fn create(s: &ServerService, restore: bool) -> Result<()> {
        let request = CreatePartitionsRequest {
            matrix: Some(matrix()),
            partition_ids: vec![0, 1],
            epoch: 1,
            restore,
        };
        s.create_checked(request).map(drop)
    }

    /// Pushes 1.0 at keys 3 and 70 of row 1 as change (writer, seq).
    fn push(s: &ServerService, writer: u64, seq: u64) -> Vec<u64> {
        let slice = |pid, key: u64| RowSlice {
            partition_id: pid,
            row: 1,
            keys: wire::encode_keys(&[key]),
            values: wire::encode_values(&[1.0f32]),
            codec: 0,
        };
        let request = PushRequest {
            caller: Some(Caller {
                worker_id: writer,
                seq,
                ..Default::default()
            }),
            matrix_id: 7,
            value_type: ValueType::F32 as i32,
            slices: vec![slice(0, 3), slice(1, 70)],
            ..Default::default()
        };
        let reply = s.push_checked(request).unwrap();
        reply.acks.iter().map(|a| a.version).collect()
    }

    fn values(s: &ServerService) -> Vec<f32> {
        let slice = |pid, key: u64| RowSlice {
            partition_id: pid,
            row: 1,
            keys: wire::encode_keys(&[key]),
            ..Default::default()
        };
        let request = PullRequest {
            caller: None,
            matrix_id: 7,
            value_type: ValueType::F32 as i32,
            slices: vec![slice(0, 3), slice(1, 70)],
        };
        let reply = s.pull_checked(request).unwrap();
        reply
            .slices
            .iter()
            .flat_map(|r| wire::decode_values::<f32>(&r.values, "v").unwrap())
            .collect()
    }

    #[test]
    fn a_restored_partition_has_the_values_and_marks_of_its_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let first = service(Some(dir.path()));
        create(&first, false).unwrap();
        assert_eq!(push(&first, 9, 1), [1, 1]);
        assert_eq!(push(&first, 9, 1), [1, 1], "a duplicate changes nothing");
        assert_eq!(push(&first, 9, 2), [2, 2]);
        let written = first.write_snapshots(&[]).unwrap();
        assert_eq!(written.partitions, 2);
        assert_eq!(
            first.write_snapshots(&[]).unwrap().partitions,
            0,
            "unchanged"
        );
        push(&first, 4, 1);
        assert_eq!(values(&first), [3.0, 3.0]);

        let second = service(Some(dir.path()));
        create(&second, true).unwrap();
        assert_eq!(
            values(&second),
            [2.0, 2.0],
            "the snapshot, without the later push"
        );
        assert_eq!(
            push(&second, 9, 2),
            [2, 2],
            "a change the snapshot holds applies once"
        );
        assert_eq!(
            push(&second, 4, 1),
            [3, 3],
            "a change it does not hold applies"
        );
        assert_eq!(values(&second), values(&first));
    }

    #[test]
    fn a_corrupt_or_missing_snapshot_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = service(Some(dir.path()));
        create(&first, false).unwrap();
        let file = dir.path().join("partitions/7/1/v000001/partition.snap");
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 20;
        bytes[last] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        let err = create(&service(Some(dir.path())), true).unwrap_err();
        assert!(matches!(err, PsError::DataLoss(_)), "{err}");
        assert!(
            err.to_string()
                .contains("partitions/7/1/v000001/partition.snap"),
            "{err}"
        );

        let err = create(&service(None), true).unwrap_err();
        assert!(err.to_string().contains("no snapshot directory"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = create(&service(Some(empty.path())), true).unwrap_err();
        assert!(err.to_string().contains("has no snapshot"), "{err}");
    }

    #[test]
    fn a_snapshot_of_another_partition_of_the_same_matrix_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = service(Some(dir.path()));
        create(&first, false).unwrap();
        push(&first, 9, 1);
        first.write_snapshots(&[]).unwrap();
        let version = |pid| dir.path().join(format!("partitions/7/{pid}/v000002"));
        assert!(version(0).is_dir() && version(1).is_dir());
        // Partition 0's file where partition 1's belongs: same matrix, shape and version.
        std::fs::copy(
            version(0).join("partition.snap"),
            version(1).join("partition.snap"),
        )
        .unwrap();
        let err = create(&service(Some(dir.path())), true).unwrap_err();
        assert!(matches!(err, PsError::DataLoss(_)), "{err}");
        assert!(
            err.to_string().contains("not of partition 1 of 'w'"),
            "{err}"
        );
    }
}
