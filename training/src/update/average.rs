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
    /// Per key, per output: the local weight, and the weight pulled at the round's start.
    weights: HashMap<u64, Vec<(f64, f32)>>,
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
            let m = missing.len();
            for (i, k) in missing.into_iter().enumerate() {
                let outputs = pulled[i..].iter().step_by(m);
                self.weights
                    .insert(k, outputs.map(|&w| (f64::from(w), w)).collect());
            }
        }
        let outputs = model.spec.kind.outputs();
        let current: Vec<f32> = (0..outputs)
            .flat_map(|o| g.keys.iter().map(move |k| (k, o)))
            .map(|(k, o)| self.weights[k][o].0 as f32)
            .collect();
        let (loss, grads) = model.gradients(rows, range, g, &current);
        let (rate, l2) = (model.spec.update.learning_rate, model.spec.update.l2);
        let n = g.keys.len();
        for (i, grad) in grads.into_iter().enumerate() {
            let w = &mut self.weights.get_mut(&g.keys[i % n]).expect("pulled above")[i / n].0;
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
        let changed: Vec<(u64, Vec<f32>)> = self
            .weights
            .drain()
            .map(|(k, outputs)| {
                let delta = |(local, pulled): &(f64, f32)| (local - f64::from(*pulled)) * share;
                (k, outputs.iter().map(|w| delta(w) as f32).collect())
            })
            .filter(|(_, d): &(u64, Vec<f32>)| d.iter().any(|d| *d != 0.0))
            .collect();
        let keys: Vec<u64> = changed.iter().map(|(k, _)| *k).collect();
        let outputs = model.spec.kind.outputs();
        let deltas: Vec<f32> = (0..outputs)
            .flat_map(|o| changed.iter().map(move |(_, d)| d[o]))
            .collect();
        worker.before_push()?;
        let change = names.as_mut().map(ChangeNames::next_change);
        model.add(&keys, &deltas, change)?;
        worker.after_step(self.started.take().unwrap_or_else(Instant::now));
        self.batches = 0;
        self.at = None;
        Ok(())
    }
}
