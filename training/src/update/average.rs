//! [`LocalModel`]: model averaging (`update = 'average'`). A worker trains a local copy of the
//! weights its mini-batches touch with plain SGD (the model's learning rate and L2) for
//! `local_steps` mini-batches — one round, one clock — then adds (local - pulled) / W to the
//! servers' weights: the servers' sum of the W workers' pushes is the average of their models.
//! Keys first seen within a round are pulled when first needed.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

use angel_client::{ChangeNames, Step};

use crate::error::Result;
use crate::model::Model;
use crate::rows::{Gathered, SparseRows};
use crate::sync::worker::Worker;

/// The round a worker is training locally; empty between rounds.
#[derive(Debug, Default)]
pub struct LocalModel {
    /// Local weights, and the weights pulled at the round's start (per key).
    weights: HashMap<u64, (f64, f32)>,
    /// Mini-batches trained in this round, the clock it pulls at and when it started.
    batches: u32,
    at: Option<Step>,
    started: Option<Instant>,
}

impl LocalModel {
    /// Trains mini-batch `range` of `rows` locally (pushing when the round is full); returns
    /// the summed loss of its rows.
    pub fn step(
        &mut self,
        (model, worker): (&Model, &mut Worker),
        (rows, range, g): (&SparseRows, Range<usize>, &Gathered),
        names: &mut Option<ChangeNames>,
    ) -> Result<f64> {
        if self.batches == 0 {
            self.started = Some(Instant::now());
            self.at = Some(worker.before_pull()?);
        }
        let missing: Vec<u64> = g
            .keys
            .iter()
            .copied()
            .filter(|k| !self.weights.contains_key(k))
            .collect();
        if !missing.is_empty() {
            let (pulled, _) = model.pull(&missing, self.at)?;
            for (k, w) in missing.into_iter().zip(pulled) {
                self.weights.insert(k, (f64::from(w), w));
            }
        }
        let current: Vec<f32> = g.keys.iter().map(|k| self.weights[k].0 as f32).collect();
        let (loss, grads) = model.gradients(rows, range, g, &current);
        let (rate, l2) = (model.spec.update.learning_rate, model.spec.update.l2);
        for (k, grad) in g.keys.iter().zip(grads) {
            let w = &mut self.weights.get_mut(k).expect("pulled above").0;
            *w -= rate * (f64::from(grad) + l2 * *w);
        }
        self.batches += 1;
        if self.batches >= model.spec.sync.local_steps {
            self.flush((model, worker), names)?;
        }
        Ok(loss)
    }

    /// Ends the round: adds (local - pulled) / W of every changed key to the servers.
    pub fn flush(
        &mut self,
        (model, worker): (&Model, &mut Worker),
        names: &mut Option<ChangeNames>,
    ) -> Result<()> {
        if self.batches == 0 {
            return Ok(());
        }
        let share = 1.0 / f64::from(model.spec.sync.workers.max(1));
        let (keys, deltas): (Vec<u64>, Vec<f32>) = self
            .weights
            .drain()
            .map(|(k, (local, pulled))| (k, ((local - f64::from(pulled)) * share) as f32))
            .filter(|(_, d)| *d != 0.0)
            .unzip();
        worker.before_push()?;
        let change = names.as_mut().map(ChangeNames::next_change);
        model.add(&keys, &deltas, change)?;
        worker.after_step(self.started.take().unwrap_or_else(Instant::now));
        self.batches = 0;
        self.at = None;
        Ok(())
    }
}
