//! [`CounterBlock`]: the string keys of one counter partition, their counts and, once sealed,
//! their indices.

use std::collections::HashMap;

use angel_proto::counter_keys::{NO_INDEX, decode_str_keys, encode_str_keys, key_hash};
use angel_proto::{CounterSnapshot, PsError, Result, wire};

use super::Growth;

/// Where a counter partition is in its lifecycle, as this server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Counting.
    Write,
    /// Seal phase 1 done: qualifying keys hold their rank within the partition.
    Ranked,
    /// Sealed: qualifying keys hold their global index.
    Read,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    count: i64,
    index: u64,
}

/// Counts and indices of the keys of one partition.
#[derive(Debug, Clone)]
pub struct CounterBlock {
    entries: HashMap<Box<str>, Entry>,
    phase: Phase,
    /// Bytes of the keys' text, kept so [`CounterBlock::usage`] need not walk them.
    key_bytes: usize,
}

impl Default for CounterBlock {
    fn default() -> Self {
        CounterBlock {
            entries: HashMap::new(),
            phase: Phase::Write,
            key_bytes: 0,
        }
    }
}

impl CounterBlock {
    /// The lifecycle phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Adds `delta` to `key`'s count, saturating at `i64::MAX` rather than wrapping negative.
    pub fn increase(&mut self, key: &str, delta: i64) {
        match self.entries.get_mut(key) {
            Some(e) => e.count = e.count.saturating_add(delta),
            None => {
                let entry = Entry {
                    count: delta,
                    index: NO_INDEX,
                };
                self.entries.insert(key.into(), entry);
                self.key_bytes += key.len();
            }
        }
    }

    /// Seal phase 1: ranks the keys counted at least `min_count` times in (hash, key) order
    /// and returns how many there are.
    pub fn rank(&mut self, min_count: i64) -> u64 {
        let mut qualifying: Vec<(u64, &str)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.count >= min_count)
            .map(|(k, _)| (key_hash(k), &**k))
            .collect();
        qualifying.sort_unstable();
        let ranks: HashMap<Box<str>, u64> = qualifying
            .into_iter()
            .enumerate()
            .map(|(rank, (_, k))| (Box::from(k), rank as u64))
            .collect();
        for (k, e) in self.entries.iter_mut() {
            e.index = ranks.get(k).copied().unwrap_or(NO_INDEX);
        }
        self.phase = Phase::Ranked;
        ranks.len() as u64
    }

    /// Seal phase 2: turns ranks into global indices by adding this partition's `offset`.
    pub fn assign(&mut self, offset: u64) {
        for e in self.entries.values_mut() {
            if e.index != NO_INDEX {
                e.index += offset;
            }
        }
        self.phase = Phase::Read;
    }

    /// (count, index) of `key`; (0, [`NO_INDEX`]) when unknown.
    pub fn get(&self, key: &str) -> (i64, u64) {
        self.entries
            .get(key)
            .map_or((0, NO_INDEX), |e| (e.count, e.index))
    }

    /// Every key with an index, with its count and index.
    pub fn indexed(&self) -> Vec<(&str, i64, u64)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.index != NO_INDEX)
            .map(|(k, e)| (&**k, e.count, e.index))
            .collect()
    }

    /// The block as a snapshot stores it.
    pub fn to_snapshot(&self) -> Result<CounterSnapshot> {
        let keys: Vec<&str> = self.entries.keys().map(|k| &**k).collect();
        let (data, lengths) = encode_str_keys(&keys)?;
        let counts: Vec<i64> = self.entries.values().map(|e| e.count).collect();
        let indices: Vec<u64> = self.entries.values().map(|e| e.index).collect();
        Ok(CounterSnapshot {
            phase: match self.phase {
                Phase::Write => 1,
                Phase::Ranked => 2,
                Phase::Read => 3,
            },
            data,
            lengths,
            counts: wire::encode_values(&counts),
            indices: wire::encode_keys(&indices),
        })
    }

    /// A block read back from a snapshot: DATA_LOSS when its parts disagree.
    pub fn from_snapshot(s: &CounterSnapshot) -> Result<Self> {
        let keys = decode_str_keys(&s.data, &s.lengths)?;
        let counts: Vec<i64> = wire::decode_values(&s.counts, "counter counts")?;
        let indices = wire::decode_keys(&s.indices, "counter indices")?;
        let phase = match s.phase {
            1 => Phase::Write,
            2 => Phase::Ranked,
            3 => Phase::Read,
            p => {
                return Err(PsError::DataLoss(format!(
                    "counter phase {p} is not 1, 2 or 3"
                )));
            }
        };
        if counts.len() != keys.len() || indices.len() != keys.len() {
            return Err(PsError::DataLoss(format!(
                "{} counter keys with {} counts and {} indices",
                keys.len(),
                counts.len(),
                indices.len()
            )));
        }
        let entries = keys
            .into_iter()
            .zip(counts.into_iter().zip(indices))
            .map(|(k, (count, index))| (Box::from(k), Entry { count, index }))
            .collect::<HashMap<Box<str>, Entry>>();
        let key_bytes = entries.keys().map(|k| k.len()).sum();
        Ok(CounterBlock {
            entries,
            phase,
            key_bytes,
        })
    }

    /// (keys, approximate bytes held).
    pub fn usage(&self) -> (u64, u64) {
        let table = table_bytes(self.entries.capacity());
        (self.entries.len() as u64, (table + self.key_bytes) as u64)
    }

    /// What the block may take while `keys` are increased: their text and the table's
    /// growth. With `exact` only keys it does not hold count; without, every key counts as
    /// new, a bound that needs no lookups. The memory account checks this first.
    pub fn growth(&self, keys: &[&str], exact: bool) -> Growth {
        let new = keys
            .iter()
            .filter(|k| !exact || !self.entries.contains_key(**k));
        let (count, text) = new.fold((0, 0), |(n, b), k| (n + 1, b + k.len()));
        let len = self.entries.len() + count;
        let before = table_bytes(self.entries.capacity()) as u64;
        // The table doubles its buckets and fills 7 of 8: at most twice the keys, plus a few.
        let after = match len > self.entries.capacity() {
            true => table_bytes(2 * len + 8) as u64,
            false => before,
        };
        let table = Growth::of_table(before, after, after / 2);
        Growth {
            kept: table.kept + text as u64,
            ..table
        }
    }
}

/// Bytes of a key table with room for `capacity` entries (a control byte each).
fn table_bytes(capacity: usize) -> usize {
    capacity * (std::mem::size_of::<(Box<str>, Entry)>() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_hash_then_key_and_skip_rare_keys() {
        let mut block = CounterBlock::default();
        for (k, n) in [("a", 3), ("b", 1), ("c", 2), ("a", 1)] {
            block.increase(k, n);
        }
        assert_eq!(block.rank(2), 2);
        block.assign(10);
        let mut expected = [(key_hash("a"), "a"), (key_hash("c"), "c")];
        expected.sort_unstable();
        for (i, (_, k)) in expected.iter().enumerate() {
            assert_eq!(block.get(k).1, 10 + i as u64);
        }
        assert_eq!(block.get("a").0, 4);
        assert_eq!(block.get("b"), (1, NO_INDEX));
        assert_eq!(block.get("zzz"), (0, NO_INDEX));
        assert_eq!(block.phase(), Phase::Read);
        let mut indexed = block.indexed();
        indexed.sort_by_key(|e| e.2);
        assert_eq!(indexed.len(), 2);
        assert_eq!(indexed[0].2, 10);
    }

    /// A seal asked again after it finished on this partition (the master's seal failed on
    /// another server) ranks and assigns afresh to the same indices.
    #[test]
    fn a_sealed_block_sealed_again_keeps_its_indices() {
        let mut block = CounterBlock::default();
        for (k, n) in [("a", 3), ("b", 1), ("c", 2), ("d", 5)] {
            block.increase(k, n);
        }
        block.rank(2);
        block.assign(7);
        let first = block.indexed();
        let mut first: Vec<_> = first
            .into_iter()
            .map(|(k, c, i)| (k.to_string(), c, i))
            .collect();
        assert_eq!(block.rank(2), 3);
        block.assign(7);
        let mut again: Vec<_> = (block.indexed().into_iter())
            .map(|(k, c, i)| (k.to_string(), c, i))
            .collect();
        first.sort();
        again.sort();
        assert_eq!((block.phase(), again), (Phase::Read, first));
    }

    #[test]
    fn a_block_survives_its_snapshot() {
        let mut block = CounterBlock::default();
        block.increase("a", 3);
        block.increase("b", 1);
        block.rank(2);
        let back = CounterBlock::from_snapshot(&block.to_snapshot().unwrap()).unwrap();
        assert_eq!(back.phase(), Phase::Ranked);
        assert_eq!(back.get("a"), block.get("a"));
        assert_eq!(back.get("b"), (1, NO_INDEX));
        let mut bad = block.to_snapshot().unwrap();
        bad.counts = wire::encode_values(&[1i64]);
        assert!(CounterBlock::from_snapshot(&bad).is_err());
    }

    #[test]
    fn growth_bounds_what_increases_take_and_counts_only_new_keys_when_exact() {
        let mut block = CounterBlock::default();
        let first: Vec<String> = (0..1000).map(|i| format!("key-{i}")).collect();
        let first: Vec<&str> = first.iter().map(|k| &**k).collect();
        let before = block.usage().1;
        let bound = block.growth(&first, false).kept;
        first.iter().for_each(|k| block.increase(k, 1));
        let grew = block.usage().1 - before;
        assert!(grew <= bound, "grew {grew}, bound {bound}");
        assert_eq!(block.growth(&first, true).bytes(), 0, "every key is held");
        assert!(
            block.growth(&first, false).bytes() > 0,
            "the bound takes every key for new"
        );
        assert_eq!(block.usage().0, 1000);
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        let mut block = CounterBlock::default();
        block.increase("k", i64::MAX - 1);
        block.increase("k", 5);
        assert_eq!(block.get("k").0, i64::MAX);
    }
}
