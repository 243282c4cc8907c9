//! [`Block`]: a rotation worker's rows of one slice, gathered once for the whole round.

use std::ops::Range;

use crate::rows::{Gathered, SparseRows};

use super::local::Local;

/// One slice's rows of a task, gathered.
pub struct Block {
    pub rows: SparseRows,
    pub gathered: Gathered,
    /// The gathered keys that belong to the rotated part, and their positions.
    pub rotated: Vec<(usize, u64)>,
    /// A hash of the rows: what the block's resume point is kept under from round to round.
    pub fingerprint: u64,
}

impl Block {
    /// The rows of each of `slices` slices of the `rotated` columns (a row's slice is that of
    /// its rotated key), gathered with the model's `bias` key.
    pub fn split(rows: &SparseRows, rotated: &Range<u64>, slices: usize, bias: u64) -> Vec<Block> {
        let width = rotated.end - rotated.start;
        let slice_of =
            |key: u64| ((key - rotated.start) as u128 * slices as u128 / width as u128) as usize;
        let mut members = vec![Vec::new(); slices];
        for r in 0..rows.len() {
            if let Some(&key) = rows.keys(r).iter().find(|k| rotated.contains(k)) {
                members[slice_of(key)].push(r);
            }
        }
        (members.into_iter())
            .map(|members| {
                let rows = rows.select(&members);
                let gathered = rows.gather(0..rows.len(), bias);
                let fingerprint = rows.fingerprint(0..rows.len(), &gathered);
                let rotated = (gathered.keys.iter().copied().enumerate())
                    .filter(|(_, k)| rotated.contains(k))
                    .collect();
                Block {
                    rows,
                    gathered,
                    rotated,
                    fingerprint,
                }
            })
            .collect()
    }

    /// The block's rotated keys, ascending.
    pub fn rotated_keys(&self) -> Vec<u64> {
        self.rotated.iter().map(|&(_, k)| k).collect()
    }

    /// The weights of the block's gathered keys, key after key (`weight_rows` each, as
    /// [`crate::kinds::Rotating::sgd_step`] takes them): the task's `users`' and the slice's
    /// pulled `items` (weight row after weight row, as pulled).
    pub fn weights(&self, weight_rows: usize, users: &Local, items: &[f32]) -> Vec<f32> {
        let (n, m) = (self.gathered.keys.len(), self.rotated.len());
        let mut weights = vec![0f32; weight_rows * n];
        for (slot, key) in self.gathered.keys.iter().enumerate() {
            if let Some(values) = users.values.get(key) {
                weights[slot * weight_rows..][..weight_rows]
                    .copy_from_slice(&values[..weight_rows]);
            }
        }
        for (j, &(slot, _)) in self.rotated.iter().enumerate() {
            (0..weight_rows).for_each(|o| weights[slot * weight_rows + o] = items[o * m + j]);
        }
        weights
    }

    /// The change of the slice's pulled `items` in the trained `weights`, weight row after
    /// weight row: what the step pushes.
    pub fn deltas(&self, weight_rows: usize, weights: &[f32], items: &[f32]) -> Vec<f32> {
        let m = self.rotated.len();
        (0..weight_rows)
            .flat_map(|o| {
                (self.rotated.iter().enumerate()).map(move |(j, &(slot, _))| (o, j, slot))
            })
            .map(|(o, j, slot)| weights[slot * weight_rows + o] - items[o * m + j])
            .collect()
    }
}
