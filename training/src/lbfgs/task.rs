//! [`GradientTask`]: one task's part of a full-batch iteration. It sums the loss and the loss's
//! gradient over all its rows at the weights on the servers (one pull per batch of rows, the
//! weights do not move during the round) and pushes the summed gradient into the model's
//! [`NEXT_GRADIENT`] once, when its rows end. The pushes of every task add up on the servers
//! to the gradient of the whole data set.

use std::collections::HashMap;

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, PushOptions};

use super::vectors::{NEXT_GRADIENT, Vectors};
use crate::error::Result;
use crate::model::Model;
use crate::rows::MiniBatches;

/// See the module documentation.
#[derive(Debug)]
pub struct GradientTask {
    model: Model,
    /// Each key's slot in `sums`.
    slots: HashMap<u64, usize>,
    /// Summed gradient, slot after slot, each slot's outputs side by side.
    sums: Vec<f64>,
    /// Summed loss and rows.
    loss: f64,
    rows: u64,
}

/// What a task's pass added up.
#[derive(Debug, Clone, Copy)]
pub struct Summed {
    /// Rows.
    pub rows: u64,
    /// Their summed loss.
    pub loss: f64,
}

impl GradientTask {
    /// A task's pass over full-batch model `model`.
    pub fn new(model: Model) -> Self {
        GradientTask {
            model,
            slots: HashMap::new(),
            sums: Vec::new(),
            loss: 0.0,
            rows: 0,
        }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Adds the loss and gradient of one batch of rows; returns the rows and their loss.
    pub fn add(&mut self, batches: &MiniBatches) -> Result<Summed> {
        let outputs = self.model.spec.kind.outputs();
        let mut summed = Summed { rows: 0, loss: 0.0 };
        for (range, g) in &batches.batches {
            let weights = self.model.weights(&g.keys)?;
            let (loss, grads) =
                (self.model).summed_gradients(&batches.rows, range.clone(), g, &weights)?;
            let n = g.keys.len();
            for (i, &key) in g.keys.iter().enumerate() {
                let next = self.slots.len();
                let slot = *self.slots.entry(key).or_insert(next);
                if slot == next {
                    self.sums.resize((next + 1) * outputs, 0.0);
                }
                for o in 0..outputs {
                    self.sums[slot * outputs + o] += grads[o * n + i];
                }
            }
            summed.rows += range.len() as u64;
            summed.loss += loss;
        }
        self.rows += summed.rows;
        self.loss += summed.loss;
        Ok(summed)
    }

    /// The task's rows ended: pushes its summed gradient (named, so a rerun of the task
    /// repeats the push without effect); returns what it summed.
    pub fn finish(&mut self) -> Result<Summed> {
        let summed = Summed {
            rows: self.rows,
            loss: self.loss,
        };
        if self.slots.is_empty() {
            return Ok(summed);
        }
        let outputs = self.model.spec.kind.outputs();
        let mut keys: Vec<(u64, usize)> = self.slots.drain().collect();
        keys.sort_unstable();
        let mut values = vec![0.0f32; keys.len() * outputs];
        for (i, &(_, slot)) in keys.iter().enumerate() {
            for o in 0..outputs {
                values[o * keys.len() + i] = self.sums[slot * outputs + o] as f32;
            }
        }
        let keys: Vec<u64> = keys.into_iter().map(|(k, _)| k).collect();
        let (model, client) = (&self.model, self.model.client());
        let rows = Vectors::new(client.clone(), &model.name, outputs, model.group());
        let change = ChangeNames::for_accumulator().map(|mut names| names.next_change());
        let how = PushOptions {
            change,
            ..Default::default()
        };
        let rows = rows.rows(NEXT_GRADIENT);
        block_on(client.push_with(&model.name, &rows, &keys, &values, how))?;
        Ok(summed)
    }
}
