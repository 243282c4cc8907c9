//! Splits one row's keys by the partition that holds them.
//!
//! Pulls are deduplicated and pushes merged by key before anything is sent; `slots` remembers
//! where each requested key's answer lands so replies come back in request order.

use angel_proto::routing::{Band, Layout};
use angel_proto::{Element, PsError, Result};

/// The keys of one request, grouped by block.
#[derive(Debug, Clone, PartialEq)]
pub struct KeySplit {
    /// One group per block that holds at least one key.
    pub groups: Vec<KeyGroup>,
    /// For each input key, in input order: (group index, index in that group's keys).
    pub slots: Vec<(u32, u32)>,
}

/// The sorted, distinct keys that fall in one block.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyGroup {
    /// Position of the block in its band.
    pub pos: usize,
    /// Distinct keys, ascending.
    pub keys: Vec<u64>,
}

impl KeySplit {
    /// Splits `keys` of a row in `band`, checking each against the layout.
    pub fn new(layout: &Layout, band: &Band, keys: &[u64]) -> Result<Self> {
        if keys.len() > u32::MAX as usize {
            return Err(PsError::TooLarge(format!(
                "{} keys in one call; the limit is {}",
                keys.len(),
                u32::MAX
            )));
        }
        match keys.windows(2).all(|w| w[0] < w[1]) {
            true => Self::of_ascending(layout, band, keys),
            false => Self::by_sorting(layout, band, keys),
        }
    }

    /// Ascending distinct keys (a training mini-batch's pull and push): each block's keys are
    /// a run of the input, found by binary search, with nothing to sort or deduplicate.
    fn of_ascending(layout: &Layout, band: &Band, keys: &[u64]) -> Result<Self> {
        if let Some(&last) = keys.last() {
            layout.check_col(last)?;
        }
        let mut groups = Vec::new();
        let mut slots = Vec::with_capacity(keys.len());
        let mut rest = keys;
        while let Some(&first) = rest.first() {
            let pos = band.locate(first);
            let end = band.cols(pos).end;
            let n = rest.partition_point(|&k| k < end);
            let g = groups.len() as u32;
            slots.extend((0..n as u32).map(|i| (g, i)));
            groups.push(KeyGroup {
                pos,
                keys: rest[..n].to_vec(),
            });
            rest = &rest[n..];
        }
        Ok(KeySplit { groups, slots })
    }

    /// Any keys: grouped by block, then sorted and deduplicated per block.
    fn by_sorting(layout: &Layout, band: &Band, keys: &[u64]) -> Result<Self> {
        let mut per_block: Vec<Vec<(u64, u32)>> = vec![Vec::new(); band.len()];
        for (i, &key) in keys.iter().enumerate() {
            layout.check_col(key)?;
            per_block[band.locate(key)].push((key, i as u32));
        }
        let mut groups = Vec::new();
        let mut slots = vec![(0u32, 0u32); keys.len()];
        for (pos, mut pairs) in per_block.into_iter().enumerate() {
            if pairs.is_empty() {
                continue;
            }
            pairs.sort_unstable_by_key(|&(key, _)| key);
            let g = groups.len() as u32;
            let mut distinct: Vec<u64> = Vec::with_capacity(pairs.len());
            for (key, i) in pairs {
                if distinct.last() != Some(&key) {
                    distinct.push(key);
                }
                slots[i as usize] = (g, distinct.len() as u32 - 1);
            }
            groups.push(KeyGroup {
                pos,
                keys: distinct,
            });
        }
        Ok(KeySplit { groups, slots })
    }

    /// Sums `values` (one per input key) into one value per distinct key of each group.
    pub fn merge<T: Element>(&self, values: &[T]) -> Vec<Vec<T>> {
        let mut merged: Vec<Vec<T>> = self
            .groups
            .iter()
            .map(|g| vec![T::default(); g.keys.len()])
            .collect();
        for (&(g, k), &v) in self.slots.iter().zip(values) {
            let slot = &mut merged[g as usize][k as usize];
            *slot = slot.plus(v);
        }
        merged
    }

    /// Puts per-group answers back in input order.
    pub fn reassemble<T: Element>(&self, answers: &[Vec<T>]) -> Vec<T> {
        self.slots
            .iter()
            .map(|&(g, k)| answers[g as usize][k as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use angel_proto::{MatrixMeta, Partition};
    use proptest::prelude::*;

    fn layout(cols: u64, blocks: u64) -> Layout {
        let step = cols.div_ceil(blocks);
        let partitions = (0..blocks)
            .map(|i| Partition {
                id: i as u32,
                row_start: 0,
                row_end: 1,
                col_start: i * step,
                col_end: ((i + 1) * step).min(cols),
                ..Default::default()
            })
            .collect();
        Layout::new(&MatrixMeta {
            name: "v".into(),
            rows: 1,
            cols,
            partitions,
            ..Default::default()
        })
        .unwrap()
    }

    proptest! {
        #[test]
        fn ascending_keys_split_as_sorting_would(mut keys in proptest::collection::vec(0u64..1000, 0..300)) {
            keys.sort_unstable();
            keys.dedup();
            let layout = layout(1000, 4);
            let band = layout.band(0).unwrap();
            let fast = KeySplit::of_ascending(&layout, band, &keys).unwrap();
            prop_assert_eq!(fast, KeySplit::by_sorting(&layout, band, &keys).unwrap());
        }

        #[test]
        fn merge_then_reassemble_matches_a_local_sum(keys in proptest::collection::vec(0u64..1000, 0..300)) {
            let layout = layout(1000, 4);
            let split = KeySplit::new(&layout, layout.band(0).unwrap(), &keys).unwrap();
            let values: Vec<i64> = (0..keys.len() as i64).collect();
            let merged = split.merge(&values);
            for g in &split.groups {
                prop_assert!(g.keys.windows(2).all(|w| w[0] < w[1]));
            }
            let totals = split.reassemble(&merged);
            for (i, &key) in keys.iter().enumerate() {
                let expected: i64 = keys.iter().zip(&values).filter(|(k, _)| **k == key).map(|(_, v)| v).sum();
                prop_assert_eq!(totals[i], expected);
            }
        }
    }

    #[test]
    fn a_key_past_the_last_column_is_out_of_range() {
        let layout = layout(100, 3);
        for keys in [[5, 100], [100, 5]] {
            let err = KeySplit::new(&layout, layout.band(0).unwrap(), &keys).unwrap_err();
            assert!(
                matches!(err, PsError::OutOfRange(ref m) if m.contains("key 100")),
                "{err}"
            );
        }
    }
}
