//! [`SparseMap`]: keys and values in two flat arrays with linear probing.
//!
//! A `HashMap<u64, f32>` pads each entry to 16 bytes and doubles its capacity when full, so a
//! sparse model costs up to ~35 bytes per key. Here keys and values live in separate arrays
//! (12 bytes per slot for f32), the table grows by 1.5x at 80% load, and a slot is free when its
//! key is `u64::MAX` (never a valid column: columns stop at 2^63). That keeps a live key at
//! 15-23 bytes.
//!
//! A map whose keys come to fill its block's columns (a boosted model's histograms, which
//! rows of a wide model touch nearly everywhere) is turned, by [`SparseMap::fill_within`], into
//! one value per column once that takes no more memory than the table: reads, adds and sums
//! then index an array instead of probing a table that no cache holds. It still behaves as a
//! sparse map (it stores its non-zero values; a snapshot writes those; `clear` empties it).

use ahash::RandomState;
use angel_proto::Element;

const EMPTY: u64 = u64::MAX;
const MAX_LOAD_NUM: usize = 4;
const MAX_LOAD_DEN: usize = 5;

/// A map from column key (< 2^63) to value; absent keys read as zero.
#[derive(Debug, Clone, Default)]
pub struct SparseMap<T> {
    keys: Vec<u64>,
    values: Vec<T>,
    len: usize,
    /// Keys come from clients: with a fixed hash, keys chosen to share a slot turn every
    /// probe into a scan of the table. A per-map random key makes such sets unguessable.
    hasher: RandomState,
    /// Set once filled: the values over the block's columns, and the table is empty.
    filled: Option<Filled<T>>,
}

/// A filled map's values: one per column from `start`, zero where absent.
#[derive(Debug, Clone)]
struct Filled<T> {
    start: u64,
    values: Vec<T>,
    /// Values that are not zero: the map's stored keys.
    nonzero: usize,
}

impl<T: Element> Filled<T> {
    fn slot(&mut self, key: u64) -> Option<&mut T> {
        let at = usize::try_from(key.checked_sub(self.start)?).ok()?;
        self.values.get_mut(at)
    }

    /// Applies `f` to the value at `key` (in range), keeping the count of non-zero values.
    fn update(&mut self, key: u64, f: impl FnOnce(T) -> T) -> bool {
        let Some(x) = self.slot(key) else {
            return false;
        };
        let was = *x != T::default();
        *x = f(*x);
        let is = *x != T::default();
        self.nonzero = self.nonzero + usize::from(is) - usize::from(was);
        true
    }
}

impl<T: Element> SparseMap<T> {
    /// Number of stored keys.
    pub fn len(&self) -> usize {
        self.filled.as_ref().map_or(self.len, |f| f.nonzero)
    }

    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the two arrays.
    pub fn memory_bytes(&self) -> usize {
        let filled = self.filled.as_ref().map_or(0, |f| f.values.capacity());
        self.keys.capacity() * 8 + (self.values.capacity() + filled) * std::mem::size_of::<T>()
    }

    /// Bytes the map holds once `new` keys it does not hold are added, by a push that first
    /// makes room for all `named` keys it names (0: no room made first, as a set). A filled
    /// map holds what it holds. The memory account checks this before the keys go in.
    pub fn bytes_after(&self, named: usize, new: usize) -> usize {
        if self.filled.is_some() {
            return self.memory_bytes();
        }
        let mut capacity = self.keys.len();
        if named > 0 {
            // As `reserve(named - len)` does.
            let needed = self.len.max(named) * MAX_LOAD_DEN / MAX_LOAD_NUM + 1;
            capacity = capacity.max(needed);
        }
        // Each insert past 80% load grows the table by 1.5x, as `slot_for_insert` does.
        let len = self.len + new;
        while len * MAX_LOAD_DEN > capacity * MAX_LOAD_NUM {
            capacity = (capacity * 3 / 2).max(16);
        }
        capacity * (8 + std::mem::size_of::<T>())
    }

    /// How many of `keys` the map does not hold (a key named twice counts twice).
    pub fn absent(&self, keys: &[u64]) -> usize {
        keys.iter().filter(|&&k| self.get(k).is_none()).count()
    }

    /// The value stored at `key`, if any.
    pub fn get(&self, key: u64) -> Option<T> {
        if let Some(f) = &self.filled {
            let at = usize::try_from(key.checked_sub(f.start)?).ok()?;
            return f.values.get(at).copied().filter(|&v| v != T::default());
        }
        self.find(key).ok().map(|slot| self.values[slot])
    }

    /// Adds `delta` to the value at `key`, inserting it when absent.
    pub fn add(&mut self, key: u64, delta: T) {
        if self.filled_update(key, |x| x.plus(delta)) {
            return;
        }
        let slot = self.slot_for_insert(key);
        self.values[slot] = self.values[slot].plus(delta);
    }

    /// Sets the value at `key`. Storing zero at an absent key stores nothing.
    pub fn set(&mut self, key: u64, value: T) {
        if self.filled_update(key, |_| value) {
            return;
        }
        if value == T::default() && self.find(key).is_err() {
            return;
        }
        let slot = self.slot_for_insert(key);
        self.values[slot] = value;
    }

    /// Every stored (key, value), in table order (a filled map's in column order).
    pub fn iter(&self) -> impl Iterator<Item = (u64, T)> + '_ {
        let table = (self.keys.iter().copied().zip(&self.values)).filter(|(k, _)| *k != EMPTY);
        let filled = (self.filled.iter())
            .flat_map(|f| (f.start..).zip(&f.values))
            .filter(|(_, v)| **v != T::default());
        table.chain(filled).map(|(k, &v)| (k, v))
    }

    /// Calls `f` on every stored (key, value) with the value mutable.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(u64, &mut T)) {
        for (k, v) in self.keys.iter().zip(self.values.iter_mut()) {
            if *k != EMPTY {
                f(*k, v);
            }
        }
        if let Some(filled) = &mut self.filled {
            let values = (filled.start..).zip(filled.values.iter_mut());
            for (k, v) in values.filter(|(_, v)| **v != T::default()) {
                f(k, v);
            }
            filled.nonzero = filled.values.iter().filter(|&&v| v != T::default()).count();
        }
    }

    /// Turns the map into one value per column of `cols` (the block's, which hold every key)
    /// when that takes no more memory than its table; see the module documentation.
    pub fn fill_within(&mut self, cols: std::ops::Range<u64>) {
        let Ok(width) = usize::try_from(cols.end.saturating_sub(cols.start)) else {
            return;
        };
        let dense = width.saturating_mul(std::mem::size_of::<T>());
        if self.filled.is_some() || self.memory_bytes() < dense {
            return;
        }
        let mut values = Vec::new();
        if values.try_reserve_exact(width).is_err() {
            return;
        }
        values.resize(width, T::default());
        let mut filled = Filled {
            start: cols.start,
            values,
            nonzero: 0,
        };
        if self.iter().any(|(k, v)| !filled.update(k, |_| v)) {
            return;
        }
        *self = SparseMap {
            filled: Some(filled),
            ..SparseMap::default()
        };
    }

    /// Applies `f` at `key` of a filled map; false when the map is not filled, or `key` lies
    /// outside its columns (the map is then a table again, to take it).
    fn filled_update(&mut self, key: u64, f: impl FnOnce(T) -> T) -> bool {
        let Some(filled) = &mut self.filled else {
            return false;
        };
        if filled.update(key, f) {
            return true;
        }
        let filled = self.filled.take().expect("filled");
        let stored = (filled.start..).zip(filled.values);
        for (k, v) in stored.filter(|(_, v)| *v != T::default()) {
            self.set(k, v);
        }
        false
    }

    /// Removes every key and frees the memory.
    pub fn clear(&mut self) {
        *self = SparseMap::default();
    }

    fn home(&self, key: u64, capacity: usize) -> usize {
        // The keyed hash's high bits scaled onto the table (capacity need not be 2^k).
        let h = self.hasher.hash_one(key);
        ((u128::from(h) * capacity as u128) >> 64) as usize
    }

    /// `Ok(slot)` holding `key`, or `Err(slot)` where it would go.
    fn find(&self, key: u64) -> Result<usize, usize> {
        let capacity = self.keys.len();
        if capacity == 0 {
            return Err(0);
        }
        let mut slot = self.home(key, capacity);
        loop {
            match self.keys[slot] {
                k if k == key => return Ok(slot),
                EMPTY => return Err(slot),
                _ => slot = if slot + 1 == capacity { 0 } else { slot + 1 },
            }
        }
    }

    fn slot_for_insert(&mut self, key: u64) -> usize {
        debug_assert_ne!(key, EMPTY, "u64::MAX is reserved");
        match self.find(key) {
            Ok(slot) => slot,
            Err(_) if (self.len + 1) * MAX_LOAD_DEN > self.keys.len() * MAX_LOAD_NUM => {
                self.grow();
                self.claim(key)
            }
            Err(slot) => self.claim_at(slot, key),
        }
    }

    fn claim(&mut self, key: u64) -> usize {
        let slot = self.find(key).expect_err("key is absent after growth");
        self.claim_at(slot, key)
    }

    fn claim_at(&mut self, slot: usize, key: u64) -> usize {
        self.keys[slot] = key;
        self.values[slot] = T::default();
        self.len += 1;
        slot
    }

    /// Makes room for `additional` more keys without growing in between (a restore knows
    /// its key count up front).
    pub fn reserve(&mut self, additional: usize) {
        if self.filled.is_some() {
            return;
        }
        let needed = (self.len + additional) * MAX_LOAD_DEN / MAX_LOAD_NUM + 1;
        if needed > self.keys.len() {
            self.grow_to(needed);
        }
    }

    fn grow(&mut self) {
        self.grow_to((self.keys.len() * 3 / 2).max(16));
    }

    fn grow_to(&mut self, capacity: usize) {
        let old_keys = std::mem::replace(&mut self.keys, vec![EMPTY; capacity]);
        let old_values = std::mem::replace(&mut self.values, vec![T::default(); capacity]);
        for (k, v) in old_keys.into_iter().zip(old_values) {
            if k != EMPTY {
                let slot = self.find(k).expect_err("keys are distinct");
                self.keys[slot] = k;
                self.values[slot] = v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u64..200, -5i64..5, any::<bool>()), 0..600)) {
            let mut map = SparseMap::<i64>::default();
            let mut reference = HashMap::new();
            for (key, v, is_set) in ops {
                if is_set {
                    map.set(key, v);
                    if v != 0 || reference.contains_key(&key) {
                        reference.insert(key, v);
                    }
                } else {
                    map.add(key, v);
                    *reference.entry(key).or_insert(0) += v;
                }
            }
            prop_assert_eq!(map.len(), reference.len());
            for (k, v) in &reference {
                prop_assert_eq!(map.get(*k), Some(*v));
            }
            let mut seen: Vec<_> = map.iter().collect();
            seen.sort_unstable();
            let mut expected: Vec<_> = reference.into_iter().collect();
            expected.sort_unstable();
            prop_assert_eq!(seen, expected);
        }
    }

    proptest! {
        #[test]
        fn bytes_after_foretells_what_a_push_or_a_set_leaves(
            held in proptest::collection::vec(0u64..3000, 0..400),
            pushed in proptest::collection::vec(0u64..3000, 0..800),
            reserve_first in any::<bool>(),
        ) {
            let mut map = SparseMap::<f32>::default();
            held.iter().for_each(|&k| map.add(k, 1.0));
            let named = if reserve_first { pushed.len() } else { 0 };
            let mut distinct = pushed.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let new = map.absent(&distinct);
            let foretold = map.bytes_after(named, new);
            prop_assert!(map.bytes_after(named, map.absent(&pushed)) >= foretold);
            if named > 0 {
                map.reserve(pushed.len().saturating_sub(map.len()));
            }
            pushed.iter().for_each(|&k| map.add(k, 2.0));
            prop_assert_eq!(map.memory_bytes(), foretold);
        }
    }

    proptest! {
        #[test]
        fn a_filled_map_reads_as_the_table_it_was(
            ops in proptest::collection::vec((0u64..40, -3i64..3, 0u8..4), 0..300)
        ) {
            // Keys 10..30 are the block's columns; a key outside them turns it back to a table.
            let mut map = SparseMap::<i64>::default();
            let mut reference = HashMap::new();
            for (key, v, op) in ops {
                match op {
                    0 => map.fill_within(10..30),
                    1 => {
                        map.set(key, v);
                        reference.insert(key, v);
                    }
                    _ => {
                        map.add(key, v);
                        *reference.entry(key).or_insert(0) += v;
                    }
                }
            }
            reference.retain(|_, v| *v != 0);
            for k in 0..40 {
                prop_assert_eq!(map.get(k).unwrap_or(0), reference.get(&k).copied().unwrap_or(0));
            }
            let mut seen: Vec<_> = map.iter().filter(|p| p.1 != 0).collect();
            seen.sort_unstable();
            let mut expected: Vec<_> = reference.into_iter().collect();
            expected.sort_unstable();
            prop_assert_eq!(seen, expected);
        }
    }

    #[test]
    fn a_map_fills_once_its_table_outweighs_the_columns() {
        let mut map = SparseMap::<f64>::default();
        (0..4).for_each(|k| map.add(k, 1.0));
        map.fill_within(0..1000);
        assert!(map.filled.is_none(), "4 keys of 1,000 columns stay a table");
        (0..900).for_each(|k| map.add(k, 1.0));
        map.fill_within(0..1000);
        assert_eq!((map.len(), map.memory_bytes()), (900, 8000));
        map.add(5000, 2.0);
        assert!(map.filled.is_none() && map.len() == 901 && map.get(5000) == Some(2.0));
    }

    /// Mean distance from a key's home slot to where it lives: the cost of a lookup.
    fn mean_probe(map: &SparseMap<f32>) -> f64 {
        let capacity = map.keys.len();
        let total: usize = map
            .iter()
            .map(|(k, _)| {
                let at = map.find(k).unwrap();
                (at + capacity - map.home(k, capacity)) % capacity
            })
            .sum();
        total as f64 / map.len() as f64
    }

    #[test]
    fn keys_chosen_to_collide_under_a_fixed_hash_spread_out() {
        // Under the Fibonacci hash `k * 0x9E37..15` these keys all had one home slot.
        let a = 0x9E37_79B9_7F4A_7C15u64;
        let mut inverse = a;
        for _ in 0..6 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(inverse)));
        }
        assert_eq!(a.wrapping_mul(inverse), 1);
        let mut map = SparseMap::<f32>::default();
        let keys = (1..320_000u64).map(|j| j.wrapping_mul(inverse));
        for k in keys.filter(|&k| k < 1 << 63) {
            map.add(k, 1.0);
        }
        assert!(map.len() > 100_000);
        let probe = mean_probe(&map);
        assert!(probe < 10.0, "mean probe {probe:.1} slots");
    }

    #[test]
    fn ten_million_f32_keys_cost_at_most_twice_the_raw_twelve_bytes() {
        let mut map = SparseMap::<f32>::default();
        let mut key = 0x1234_5678u64;
        for _ in 0..10_000_000 {
            key = key
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            map.add(key >> 1, 1.0);
        }
        let per_key = map.memory_bytes() as f64 / map.len() as f64;
        assert!(map.len() > 9_990_000, "{} distinct keys", map.len());
        assert!(per_key <= 24.0, "{per_key:.1} bytes per key");
    }
}
