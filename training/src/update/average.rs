//! [`LocalModel`]: model averaging (`update = 'average'`, `angel_optim::rule::average`). A
//! worker trains a local copy of the rows its mini-batches touch — the weights and the
//! optimizer's state — with the model's own optimizer for `local_steps` mini-batches (one
//! round, one clock), then adds (local - pulled) / W of every row to the servers: the servers'
//! sum of the W workers' pushes is the average of their models, optimizer state included.
//! Keys first seen within a round are pulled when first needed.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

use angel_client::{ChangeNames, WorkerClock};
use angel_optim::rule::average::share;

use crate::error::Result;
use crate::model::Model;
use crate::rows::{Gathered, SparseRows};
use crate::sync::worker::ClockWorker;

/// One key's rows in a round: per output, the weight and its optimizer state, as trained
/// locally and as pulled at the round's start.
#[derive(Debug)]
struct Slots {
    local: Vec<f64>,
    pulled: Vec<f32>,
}

/// The round a worker is training locally; empty between rounds.
#[derive(Debug, Default)]
pub struct LocalModel {
    slots: HashMap<u64, Slots>,
    /// Mini-batches trained in this round, the clock it pulls at and when it started.
    batches: u32,
    at: Option<WorkerClock>,
    started: Option<Instant>,
}

impl LocalModel {
    /// Trains mini-batch `range` of `rows` locally (pushing when the round is full); returns
    /// the summed loss of its rows.
    pub fn step(
        &mut self,
        (model, worker): (&Model, &mut ClockWorker),
        (rows, range, g): (&SparseRows, Range<usize>, &Gathered),
        names: &mut Option<ChangeNames>,
    ) -> Result<f64> {
        if self.batches == 0 {
            self.started = Some(Instant::now());
            self.at = Some(worker.before_pull()?);
        }
        self.pull_missing(model, &g.keys)?;
        let (outputs, group) = (model.spec.kind.weight_rows(), model.group());
        let current: Vec<f32> = (0..outputs)
            .flat_map(|o| g.keys.iter().map(move |k| (k, o)))
            .map(|(k, o)| self.slots[k].local[o * group] as f32)
            .collect();
        let (loss, grads) = model.gradients(rows, range, g, &current)?;
        let optimizer = model.spec.local_optimizer()?;
        let n = g.keys.len();
        for (i, grad) in grads.into_iter().enumerate() {
            let (key, o) = (g.keys[i % n], i / n);
            let slots = self.slots.get_mut(&key).expect("pulled above");
            let slot = &mut slots.local[o * group..(o + 1) * group];
            optimizer.apply(slot, f64::from(grad), &model.spec.optimizer);
        }
        self.batches += 1;
        if self.batches >= model.spec.sync.local_steps {
            self.flush((model, worker), names)?;
        }
        Ok(loss)
    }

    /// Pulls every row of the `keys` this round has not seen yet, at the round's clock.
    fn pull_missing(&mut self, model: &Model, keys: &[u64]) -> Result<()> {
        let missing: Vec<u64> = (keys.iter().copied())
            .filter(|k| !self.slots.contains_key(k))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let pulled = model.pull_all(&missing, self.at)?;
        let m = missing.len();
        for (i, k) in missing.into_iter().enumerate() {
            let pulled: Vec<f32> = pulled[i..].iter().step_by(m).copied().collect();
            let local = pulled.iter().map(|&v| f64::from(v)).collect();
            self.slots.insert(k, Slots { local, pulled });
        }
        Ok(())
    }

    /// Ends the round: adds (local - pulled) / W of every row of every changed key to the
    /// servers.
    pub fn flush(
        &mut self,
        (model, worker): (&Model, &mut ClockWorker),
        names: &mut Option<ChangeNames>,
    ) -> Result<()> {
        if self.batches == 0 {
            return Ok(());
        }
        let workers = model.spec.sync.workers;
        let mut changed: Vec<(u64, Vec<f32>)> = (self.slots.drain())
            .map(|(k, s)| {
                let pairs = s.local.iter().zip(&s.pulled);
                let deltas = pairs.map(|(&l, &p)| share(l, f64::from(p), workers) as f32);
                (k, deltas.collect())
            })
            .filter(|(_, d): &(u64, Vec<f32>)| d.iter().any(|d| *d != 0.0))
            .collect();
        // Keys in order, so a rerun pushes the same bytes (BSP repeats bit for bit).
        changed.sort_unstable_by_key(|(k, _)| *k);
        let keys: Vec<u64> = changed.iter().map(|(k, _)| *k).collect();
        let rows = model.spec.kind.weight_rows() * model.group();
        let deltas: Vec<f32> = (0..rows)
            .flat_map(|r| changed.iter().map(move |(_, d)| d[r]))
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
