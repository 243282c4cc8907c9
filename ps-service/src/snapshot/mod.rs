//! Snapshots: partitions and the master's state written to a directory on any store
//! (a local path, `s3://`, `hdfs://`), read back to restore them.
//!
//! - [`file`]: the bytes of one snapshot file (magic, message, checksum).
//! - [`SnapshotDir`]: where each file lives. Every partition has its own versioned directory
//!   (`partitions/<matrix id>/<partition id>/v000007/partition.snap` and `_CURRENT`, see
//!   [`angel_storage::versions`]), so a partition restores on any server and a snapshot
//!   half-written when its server died is never read. The master's state is `master/`.

pub mod file;

use angel_proto::{MasterSnapshot, PartitionSnapshot, PsError, Result};
use angel_storage::versions::Versions;
use angel_storage::{Location, StorageError};
use bytes::Bytes;
use file::Kind;

/// File name of a partition snapshot inside its version directory.
const PARTITION_FILE: &str = "partition.snap";
/// File name of the master's state inside its version directory.
const MASTER_FILE: &str = "master.snap";

/// The root of a service's snapshots.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    root: Location,
}

impl SnapshotDir {
    /// The snapshot directory at `url` (a path or URL), or INVALID_ARGUMENT naming it.
    pub fn parse(url: &str) -> Result<Self> {
        Location::parse(url)
            .map(|root| SnapshotDir { root })
            .map_err(|e| PsError::InvalidArgument(format!("--snapshot-dir: {e}")))
    }

    /// The directory as given.
    pub fn url(&self) -> String {
        self.root.url()
    }

    fn partition_dir(&self, id: u32, partition_id: u32) -> Versions {
        let dir = self.root.child(&format!("partitions/{id}/{partition_id}"));
        Versions::new(dir)
    }

    /// Commits `snapshot` as the newest of its partition. Blocking.
    pub fn write_partition(&self, id: u32, snapshot: &PartitionSnapshot) -> Result<u64> {
        let versions = self.partition_dir(id, snapshot.partition_id);
        write(
            &versions,
            PARTITION_FILE,
            file::encode(Kind::Partition, snapshot),
        )
    }

    /// The newest committed snapshot of partition `partition_id` of matrix (or counter) `id`,
    /// refused past `max` bytes (what the reading server could host). DATA_LOSS when there is
    /// none, or it is corrupt. Blocking.
    pub fn read_partition(
        &self,
        id: u32,
        partition_id: u32,
        max: u64,
    ) -> Result<PartitionSnapshot> {
        let versions = self.partition_dir(id, partition_id);
        read(&versions, PARTITION_FILE, (Kind::Partition, max))
    }
}

impl SnapshotDir {
    fn master_dir(&self) -> Versions {
        Versions::new(self.root.child("master"))
    }

    /// Commits the master's state. Blocking.
    pub fn write_master(&self, state: &MasterSnapshot) -> Result<u64> {
        write(
            &self.master_dir(),
            MASTER_FILE,
            file::encode(Kind::Master, state),
        )
    }

    /// The master's committed state; None when this directory has none yet. Blocking.
    pub fn read_master(&self) -> Result<Option<MasterSnapshot>> {
        match read(
            &self.master_dir(),
            MASTER_FILE,
            (Kind::Master, MAX_MASTER_BYTES),
        ) {
            Ok(state) => Ok(Some(state)),
            Err(PsError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Writes `bytes` as a new version of `versions` and commits it; returns the bytes written.
fn write(versions: &Versions, name: &str, bytes: Bytes) -> Result<u64> {
    let len = bytes.len() as u64;
    let pending = versions.begin().map_err(unwritable)?;
    angel_storage::write::put(&pending.location().child(name), bytes).map_err(unwritable)?;
    pending.commit().map_err(unwritable)?;
    Ok(len)
}

/// Most bytes the master's state may hold: its matrices', counters' and servers'
/// descriptions, never their data.
const MAX_MASTER_BYTES: u64 = 1 << 30;

/// The message in the committed version of `versions`, of `kind` and at most `max` bytes:
/// NOT_FOUND when there is no file, DATA_LOSS when it cannot be read whole.
fn read<M: prost::Message + Default>(
    versions: &Versions,
    name: &str,
    (kind, max): (Kind, u64),
) -> Result<M> {
    let location = versions.current().map_err(unavailable)?.child(name);
    match angel_storage::read::read_all(&location, max) {
        Ok(bytes) => file::decode(kind, &bytes, &location.to_string()),
        Err(e) if e.is_not_found() => Err(PsError::NotFound(format!("no snapshot at {location}"))),
        Err(e) => Err(unavailable(e)),
    }
}

/// A store that refused a write (full, read-only, a file in the way): asked again at once it
/// would refuse the same, so the caller is told now (FAILED_PRECONDITION) rather than retrying
/// for a minute as for a server that is away (UNAVAILABLE).
fn unwritable(e: StorageError) -> PsError {
    PsError::WrongState(format!(
        "snapshot storage cannot be written: {e}; the servers keep their data and write again \
         at the next interval: free or fix the store"
    ))
}

fn unavailable(e: StorageError) -> PsError {
    PsError::Unavailable(format!("snapshot storage: {e}"))
}
