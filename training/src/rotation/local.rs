//! [`Local`]: a rotation worker's own columns (its users' factors), trained in place and
//! pushed back as one change at the end of each round.

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

    /// Adds the change since the pull (or the last push) to the model.
    pub fn push(&mut self, model: &Model) -> Result<()> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let n = self.keys.len();
        let rows = self.pulled.len() / n;
        let deltas: Vec<f32> = (0..rows)
            .flat_map(|o| (0..n).map(move |j| (o, j)))
            .map(|(o, j)| self.values[&self.keys[j]][o] - self.pulled[o * n + j])
            .collect();
        model.add(&self.keys, &deltas, None)?;
        // The servers add in f32 as computed here: they now hold pulled + delta.
        for (at, delta) in deltas.iter().enumerate() {
            self.pulled[at] += delta;
        }
        Ok(())
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
