//! [`Applied`]: what one partition has applied (its version and [`Marks`]), and
//! [`Snapshotted`]: what its newest committed snapshot holds. Every hosted partition, of a
//! matrix or a counter, keeps both beside its data.

use std::time::{Duration, Instant};

use angel_proto::{Ack, Caller};

use super::marks::{Marks, Seen, WINDOW};

/// Changed only under the partition's data write lock, so a snapshot taken under its read lock
/// sees data, version and marks that agree.
#[derive(Debug, Default)]
pub struct Applied {
    /// Changes applied since the partition was created (restores keep counting).
    pub version: u64,
    /// Which (writer, seq) were applied.
    pub marks: Marks,
    /// Changes refused as already applied.
    pub duplicates: u64,
    /// Changes refused as older than their writer's window (applied long ago, or lost).
    pub below_window: u64,
    /// Replayed changes applied after a restore.
    pub replayed: u64,
}

impl Applied {
    /// Counts in `caller`'s change and returns true, or returns false (counted as a duplicate)
    /// when the partition applied it before.
    pub fn admit(&mut self, caller: &Caller) -> bool {
        let writer = match caller.task {
            0 => caller.worker_id,
            task => task,
        };
        match self.marks.see(writer, caller.seq) {
            Seen::First => {
                self.version += 1;
                self.replayed += u64::from(caller.replay);
                true
            }
            Seen::Again => {
                self.duplicates += 1;
                false
            }
            Seen::BelowWindow => {
                tracing::warn!(
                    writer,
                    seq = caller.seq,
                    "change refused: older than its writer's window of {WINDOW} changes"
                );
                self.below_window += 1;
                false
            }
        }
    }
}

/// The newest committed snapshot of a partition.
#[derive(Debug, Default, Clone)]
pub struct Snapshotted {
    /// The version it holds.
    pub version: u64,
    /// When it was committed, its size, and how long taking it held off changes.
    pub at: Option<Instant>,
    pub bytes: u64,
    pub pause: Duration,
    /// Snapshots of it this server has written (the bench counts them).
    pub count: u64,
}

/// The answer to one partition's part of a change.
pub fn ack(partition_id: u32, applied: &Applied, snapshotted: &Snapshotted) -> Ack {
    Ack {
        partition_id,
        version: applied.version,
        durable: snapshotted.version,
    }
}
