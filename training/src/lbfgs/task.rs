//! [`GradientTask`]: one task's part of a full-batch iteration. It sums the loss and the loss's
//! gradient over all its rows at the weights on the servers (which do not move during the
//! pass) and pushes the summed gradient into the model's [`NEXT_GRADIENT`] once, when its rows
//! end. The pushes of every task add up on the servers to the gradient of the whole data set.
//!
//! A model of at most [`DENSE_WEIGHTS`] weights is pulled whole at the task's first rows and
//! its gradient summed in a dense vector; a wider one is pulled batch by batch, for the keys a
//! batch uses, and its gradient summed per key.

use std::collections::HashMap;

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, PushOptions};

use super::vectors::{NEXT_GRADIENT, Vectors};
use crate::error::Result;
use crate::model::Model;
use crate::rows::{Gathered, MiniBatches};
use crate::task_pass::Trained;

/// Weights up to which a task pulls every weight once per pass (32 MB of sums at most) rather
/// than each batch's keys.
pub const DENSE_WEIGHTS: u64 = 1 << 22;

/// See the module documentation.
#[derive(Debug)]
pub struct GradientTask {
    model: Model,
    /// A dense model's every weight, output after output, pulled at the first rows.
    weights: Option<Vec<f32>>,
    sums: Sums,
    /// Trained loss and rows.
    loss: f64,
    rows: u64,
}

impl GradientTask {
    /// A task's pass over full-batch model `model`.
    pub fn new(model: Model) -> Self {
        let outputs = model.spec.kind.outputs();
        let weights = (model.spec.dim + 1) * outputs as u64;
        let sums = match weights <= DENSE_WEIGHTS {
            true => Sums::dense((model.spec.dim + 1) as usize, outputs),
            false => Sums::by_key(outputs),
        };
        GradientTask {
            model,
            weights: None,
            sums,
            loss: 0.0,
            rows: 0,
        }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Adds the loss and gradient of one batch of rows; returns the rows and their loss.
    pub fn add(&mut self, batches: &MiniBatches) -> Result<Trained> {
        let mut summed = Trained::default();
        for (range, g) in &batches.batches {
            let weights = self.weights(g)?;
            let (loss, grads) =
                (self.model).summed_gradients(&batches.rows, range.clone(), g, &weights)?;
            self.sums.add(&g.keys, &grads);
            summed.rows += range.len() as u64;
            summed.loss += loss;
        }
        self.rows += summed.rows;
        self.loss += summed.loss;
        Ok(summed)
    }

    /// The weights of the keys `g` gathered, output after output.
    fn weights(&mut self, g: &Gathered) -> Result<Vec<f32>> {
        let Sums::Dense { columns, .. } = self.sums else {
            return self.model.weights(&g.keys);
        };
        if self.weights.is_none() {
            let (model, rows) = (&self.model, self.model.weight_row_ids());
            let pulled = block_on(model.client().pull_rows::<f32>(&model.name, &rows))?;
            self.weights = Some(pulled.concat());
        }
        let all = self.weights.as_ref().expect("pulled above");
        let outputs = self.model.spec.kind.outputs();
        Ok((0..outputs)
            .flat_map(|o| g.keys.iter().map(move |&k| all[o * columns + k as usize]))
            .collect())
    }

    /// The task's rows ended: pushes its summed gradient (named, so a rerun of the task
    /// repeats the push without effect); returns what it summed.
    pub fn finish(&mut self) -> Result<Trained> {
        let summed = Trained {
            rows: self.rows,
            loss: self.loss,
        };
        let (keys, values) = self.sums.take();
        if keys.is_empty() {
            return Ok(summed);
        }
        let (model, client) = (&self.model, self.model.client());
        let outputs = model.spec.kind.outputs();
        let vectors = Vectors::new(client.clone(), &model.name, outputs, model.group());
        let change = ChangeNames::for_accumulator().map(|mut names| names.next_change());
        let how = PushOptions {
            change,
            ..Default::default()
        };
        let rows = vectors.rows(NEXT_GRADIENT);
        block_on(client.push_with(&model.name, &rows, &keys, &values, how))?;
        Ok(summed)
    }
}

/// A summed gradient: dense over a model's columns, or per key for a wide model.
#[derive(Debug)]
enum Sums {
    /// Every column's sum, output after output.
    Dense {
        columns: usize,
        outputs: usize,
        sums: Vec<f64>,
    },
    /// Each key's slot in `sums`, whose slots hold every output's sum side by side.
    ByKey {
        outputs: usize,
        slots: HashMap<u64, usize>,
        sums: Vec<f64>,
    },
}

impl Sums {
    fn dense(columns: usize, outputs: usize) -> Self {
        Sums::Dense {
            columns,
            outputs,
            sums: vec![0.0; columns * outputs],
        }
    }

    fn by_key(outputs: usize) -> Self {
        Sums::ByKey {
            outputs,
            slots: HashMap::new(),
            sums: Vec::new(),
        }
    }

    /// Adds `grads` of `keys` (output after output).
    fn add(&mut self, keys: &[u64], grads: &[f64]) {
        let n = keys.len();
        match self {
            Sums::Dense {
                columns,
                outputs,
                sums,
            } => {
                for o in 0..*outputs {
                    for (i, &key) in keys.iter().enumerate() {
                        sums[o * *columns + key as usize] += grads[o * n + i];
                    }
                }
            }
            Sums::ByKey {
                outputs,
                slots,
                sums,
            } => {
                for (i, &key) in keys.iter().enumerate() {
                    let next = slots.len();
                    let slot = *slots.entry(key).or_insert(next);
                    if slot == next {
                        sums.resize((next + 1) * *outputs, 0.0);
                    }
                    for o in 0..*outputs {
                        sums[slot * *outputs + o] += grads[o * n + i];
                    }
                }
            }
        }
    }

    /// The keys summed into, ascending (a dense sum: those not zero), and their sums output
    /// after output; empties the sums.
    fn take(&mut self) -> (Vec<u64>, Vec<f32>) {
        match self {
            Sums::Dense {
                columns,
                outputs,
                sums,
            } => {
                let (columns, sums) = (*columns, std::mem::take(sums));
                let keys: Vec<u64> = (0..columns)
                    .filter(|&k| (0..*outputs).any(|o| sums[o * columns + k] != 0.0))
                    .map(|k| k as u64)
                    .collect();
                let values = (0..*outputs)
                    .flat_map(|o| keys.iter().map(move |&k| o * columns + k as usize))
                    .map(|at| sums[at] as f32)
                    .collect();
                (keys, values)
            }
            Sums::ByKey {
                outputs,
                slots,
                sums,
            } => {
                let outputs = *outputs;
                let mut keys: Vec<(u64, usize)> = slots.drain().collect();
                keys.sort_unstable();
                let values = (0..outputs)
                    .flat_map(|o| keys.iter().map(move |&(_, slot)| slot * outputs + o))
                    .map(|at| sums[at] as f32)
                    .collect();
                sums.clear();
                (keys.into_iter().map(|(k, _)| k).collect(), values)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dense and the per-key sums of the same batches give the same keys and values.
    #[test]
    fn dense_and_per_key_sums_agree() {
        let batches: [(&[u64], &[f64]); 2] = [
            (&[1, 4, 9], &[0.5, -1.0, 2.0, 1.5, 0.0, -2.0]),
            (&[0, 4, 9], &[3.0, 1.0, -2.0, 0.25, 0.5, 2.0]),
        ];
        let (mut dense, mut by_key) = (Sums::dense(10, 2), Sums::by_key(2));
        for (keys, grads) in batches {
            dense.add(keys, grads);
            by_key.add(keys, grads);
        }
        let (keys, values) = dense.take();
        // Key 9's sums are 0 in both outputs: the dense sums leave it out.
        assert_eq!(keys, vec![0, 1, 4]);
        assert_eq!(values, vec![3.0, 0.5, 0.0, 0.25, 1.5, 0.5]);
        let (all_keys, all_values) = by_key.take();
        assert_eq!(all_keys, vec![0, 1, 4, 9]);
        assert_eq!(all_values, vec![3.0, 0.5, 0.0, 0.0, 0.25, 1.5, 0.5, 0.0]);
    }
}
