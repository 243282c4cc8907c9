//! [`Local`]: a rotation worker's own columns (its users' factors), trained in place and
//! pushed back in changes (each step's with its slice's on Ballista, the round's at its end
//! embedded).

use std::collections::HashMap;
use std::ops::Range;

use crate::error::Result;
use crate::model::Model;
use crate::rows::SparseRows;

/// The task's own (not rotated) columns: their values as the PS has them and as trained.
pub struct Local {
    keys: Vec<u64>,
    /// The values on the PS, weight row after weight row.
    pulled: Vec<f32>,
    pub values: HashMap<u64, Vec<f32>>,
}

impl Local {
    /// Pulls the columns of `rows` outside the `rotated` ones from `model`.
    pub fn pull(model: &Model, rows: &SparseRows, rotated: &Range<u64>) -> Result<Self> {
        let keys = own_keys(rows, rotated);
        let pulled = match keys.is_empty() {
            true => Vec::new(),
            false => model.pull_all(&keys, None)?,
        };
        let rows = pulled.len() / keys.len().max(1);
        let values = (keys.iter().enumerate())
            .map(|(j, &k)| (k, (0..rows).map(|o| pulled[o * keys.len() + j]).collect()))
            .collect();
        Ok(Local {
            keys,
            pulled,
            values,
        })
    }

    /// Keeps the trained values of the task's keys among a block's `weights` of its gathered
    /// `keys` (key after key).
    pub fn keep(&mut self, keys: &[u64], weights: &[f32], weight_rows: usize) {
        for (slot, key) in keys.iter().enumerate() {
            if let Some(values) = self.values.get_mut(key) {
                values[..weight_rows]
                    .copy_from_slice(&weights[slot * weight_rows..][..weight_rows]);
            }
        }
    }

    /// The task's keys, ascending.
    pub fn keys(&self) -> Vec<u64> {
        self.keys.clone()
    }

    /// The change, since the pull or the last change taken, of the task's keys among `keys`:
    /// those keys ascending, and their changes weight row after weight row. The caller pushes
    /// it: from now on the servers are taken to hold the values trained.
    pub fn take_change(&mut self, keys: &[u64]) -> (Vec<u64>, Vec<f32>) {
        let mut own: Vec<usize> = (keys.iter())
            .filter_map(|k| self.keys.binary_search(k).ok())
            .collect();
        own.sort_unstable();
        own.dedup();
        let n = self.keys.len();
        let rows = self.pulled.len() / n.max(1);
        let mut deltas = Vec::with_capacity(rows * own.len());
        for o in 0..rows {
            for &j in &own {
                let delta = self.values[&self.keys[j]][o] - self.pulled[o * n + j];
                // The servers add in f32 as computed here: they will hold pulled + delta.
                self.pulled[o * n + j] += delta;
                deltas.push(delta);
            }
        }
        (own.iter().map(|&j| self.keys[j]).collect(), deltas)
    }
}

/// The distinct keys of `rows` outside the `rotated` columns, ascending.
fn own_keys(rows: &SparseRows, rotated: &Range<u64>) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..rows.len())
        .flat_map(|r| rows.keys(r).iter().copied())
        .filter(|k| !rotated.contains(k))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}
