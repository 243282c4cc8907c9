//! [`ReplayBuffer`]: the changes this client made that no snapshot of their partition holds
//! yet. When the master restores a partition from its snapshot on another server (its server
//! died), the client resends them there, marked as replays; the server's marks refuse any the
//! snapshot did hold, so nothing is lost and nothing applied twice.
//!
//! Every push and counter increase answers an [`Ack`] per partition: the version the change
//! got, and the version the partition's newest snapshot holds. A change is kept until an ack
//! (or a snapshot the client asked for) shows a snapshot at or past its version. Past its size
//! the client asks for snapshots of what it holds and waits for them (back-pressure, see
//! `PsClient::relieve`); only past twice its size, when snapshots fail, are the oldest changes
//! dropped, and if their partition is later restored from a snapshot that does not hold them,
//! they are counted as lost (and logged), never silently.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use angel_proto::{Ack, Caller, CounterKeys, RowSlice};
use parking_lot::Mutex;

/// A change to one partition, as it was sent.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// Slices of one push to one partition of a matrix.
    Push {
        matrix_id: u32,
        value_type: i32,
        gradients: bool,
        slices: Vec<RowSlice>,
    },
    /// One counter increase's keys of one counter partition.
    Count { counter_id: u32, part: CounterKeys },
}

impl Change {
    fn bytes(&self) -> usize {
        match self {
            Change::Push { slices, .. } => slices
                .iter()
                .map(|s| s.keys.len() + s.values.len() + 32)
                .sum(),
            Change::Count { part, .. } => part.data.len() + part.lengths.len() + part.deltas.len(),
        }
    }
}

#[derive(Debug)]
struct Entry {
    caller: Caller,
    version: u64,
    change: Change,
}

/// What is held for one partition.
#[derive(Debug, Default)]
struct Held {
    entries: VecDeque<Entry>,
    /// Versions of changes dropped for room before a snapshot held them.
    dropped: Vec<u64>,
}

impl Held {
    /// Forgets what a snapshot at `durable` holds; returns the bytes freed.
    fn forget(&mut self, durable: u64) -> usize {
        let mut freed = 0;
        while self.entries.front().is_some_and(|e| e.version <= durable) {
            let e = self.entries.pop_front().expect("checked");
            freed += e.change.bytes();
        }
        self.dropped.retain(|&v| v > durable);
        freed
    }
}

/// Held changes by (matrix or counter id, partition id), and their total bytes.
type Parts = (HashMap<(u32, u32), Held>, usize);

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct ReplayBuffer {
    held: Mutex<Parts>,
    limit: usize,
    replayed: AtomicU64,
    lost: AtomicU64,
}

impl ReplayBuffer {
    /// A buffer of `limit` bytes of changes (twice that at most).
    pub(crate) fn new(limit: usize) -> Self {
        ReplayBuffer {
            held: Mutex::new((HashMap::new(), 0)),
            limit,
            replayed: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }

    /// Keeps `change` to partition `ack.partition_id` of `id`, applied at `ack.version`, unless
    /// the partition's snapshot already holds it; forgets what the snapshot now holds.
    pub(crate) fn keep(&self, id: u32, ack: &Ack, caller: &Caller, change: Change) {
        let mut guard = self.held.lock();
        let (held, bytes) = &mut *guard;
        let part = held.entry((id, ack.partition_id)).or_default();
        *bytes -= part.forget(ack.durable);
        if ack.version > ack.durable {
            *bytes += change.bytes();
            part.entries.push_back(Entry {
                caller: *caller,
                version: ack.version,
                change,
            });
        }
        // Past twice the size, the oldest changes of the partitions holding the most go first.
        while *bytes > self.limit.saturating_mul(2) {
            let Some(part) = held.values_mut().max_by_key(|h| h.entries.len()) else {
                break;
            };
            let Some(e) = part.entries.pop_front() else {
                break;
            };
            *bytes -= e.change.bytes();
            part.dropped.push(e.version);
        }
    }

    /// Forgets every held change, returning how many there were: they went to a service that
    /// no longer answers at its master's address, and the one there now never held them.
    pub(crate) fn clear(&self) -> usize {
        let mut guard = self.held.lock();
        let held = guard.0.values().map(|h| h.entries.len()).sum();
        *guard = (HashMap::new(), 0);
        held
    }

    /// Whether the buffer holds more than its size: time to ask for snapshots.
    pub(crate) fn over_limit(&self) -> bool {
        self.held.lock().1 > self.limit
    }

    /// The matrices and counters (ids) it holds changes of.
    pub(crate) fn held_ids(&self) -> Vec<u32> {
        let held = self.held.lock();
        let mut ids: Vec<u32> = held
            .0
            .iter()
            .filter(|(_, h)| !h.entries.is_empty())
            .map(|((id, _), _)| *id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Forgets the changes to partition `pid` of `id` that its snapshot at `durable` holds.
    pub(crate) fn forget(&self, id: u32, pid: u32, durable: u64) {
        let mut guard = self.held.lock();
        let (held, bytes) = &mut *guard;
        if let Some(part) = held.get_mut(&(id, pid)) {
            *bytes -= part.forget(durable);
        }
    }

    /// The changes partition `pid` of `id`, restored at version `restored`, needs again, oldest
    /// first, and how many are lost: dropped for room, and not held by the snapshot.
    pub(crate) fn take(&self, id: u32, pid: u32, restored: u64) -> (Vec<(Caller, Change)>, u64) {
        let mut guard = self.held.lock();
        let (held, bytes) = &mut *guard;
        let Some(part) = held.remove(&(id, pid)) else {
            return (Vec::new(), 0);
        };
        let lost = part.dropped.iter().filter(|&&v| v > restored).count() as u64;
        if lost > 0 {
            self.lost.fetch_add(lost, Ordering::Relaxed);
            tracing::error!(
                id,
                pid,
                lost,
                "changes lost: the replay buffer had dropped them for room (raise replay_bytes)"
            );
        }
        *bytes -= part.entries.iter().map(|e| e.change.bytes()).sum::<usize>();
        let again: Vec<_> = part
            .entries
            .into_iter()
            .filter(|e| e.version > restored)
            .map(|e| (e.caller, e.change))
            .collect();
        self.replayed
            .fetch_add(again.len() as u64, Ordering::Relaxed);
        (again, lost)
    }

    /// Counts `n` changes to partition `pid` of `id` as lost: taken to be replayed, they
    /// could not be resent.
    pub(crate) fn lose(&self, n: u64, id: u32, pid: u32) {
        self.replayed.fetch_sub(n, Ordering::Relaxed);
        self.lost.fetch_add(n, Ordering::Relaxed);
        tracing::error!(id, pid, n, "changes lost: they could not be replayed");
    }

    /// Changes replayed so far, and changes lost.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.replayed.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(n: u8) -> Change {
        Change::Count {
            counter_id: 1,
            part: CounterKeys {
                data: vec![n; 10].into(),
                ..Default::default()
            },
        }
    }

    fn ack(version: u64, durable: u64) -> Ack {
        Ack {
            partition_id: 0,
            version,
            durable,
        }
    }

    fn caller(seq: u64) -> Caller {
        Caller {
            worker_id: 1,
            seq,
            ..Default::default()
        }
    }

    #[test]
    fn changes_are_kept_until_a_snapshot_holds_them() {
        let buffer = ReplayBuffer::new(1 << 20);
        for v in 1..=4 {
            buffer.keep(1, &ack(v, 1), &caller(v), count(v as u8));
        }
        buffer.keep(1, &ack(5, 3), &caller(5), count(5));
        let (again, lost) = buffer.take(1, 0, 4);
        assert_eq!(lost, 0);
        let seqs: Vec<u64> = again.iter().map(|(c, _)| c.seq).collect();
        assert_eq!(seqs, [5], "4 and below are in the restored snapshot");
        assert_eq!(buffer.counts(), (1, 0));
        assert!(buffer.take(1, 0, 0).0.is_empty(), "taken once");
    }

    #[test]
    fn a_snapshot_asked_for_frees_what_it_holds() {
        let buffer = ReplayBuffer::new(25);
        for v in 1..=3 {
            buffer.keep(4, &ack(v, 0), &caller(v), count(v as u8));
        }
        assert!(buffer.over_limit() && buffer.held_ids() == [4]);
        buffer.forget(4, 0, 2);
        assert!(!buffer.over_limit());
        let (again, lost) = buffer.take(4, 0, 0);
        assert_eq!((again.len(), lost), (1, 0), "only the third is left");
    }

    #[test]
    fn changes_dropped_for_room_count_as_lost_only_if_the_snapshot_lacks_them() {
        let buffer = ReplayBuffer::new(12);
        for v in 1..=3 {
            buffer.keep(1, &ack(v, 0), &caller(v), count(v as u8));
        }
        assert!(buffer.over_limit());
        // 10 bytes each: the first was dropped to stay under twice the size (24).
        assert_eq!(buffer.take(1, 0, 0).0.len(), 2);
        assert_eq!(buffer.counts(), (2, 1));
        for v in 1..=3 {
            buffer.keep(2, &ack(v, 0), &caller(v), count(v as u8));
        }
        let (again, lost) = buffer.take(2, 0, 1);
        assert_eq!(
            (again.len(), lost),
            (2, 0),
            "the dropped change is in the snapshot"
        );
        assert_eq!(
            buffer.counts().1,
            1,
            "the dropped change is in the snapshot"
        );
    }
}
