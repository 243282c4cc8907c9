//! [`RotationTask`]: one worker of model rotation (Harp's), for a model trained with
//! `parallelism = 'rotation'`.
//!
//! The task keeps its rows (its users' ratings, the statement's rows being split by user) and
//! its users' factors for the whole statement. The model's rotated part (the item factors) is
//! cut into slices that the master hands out under exclusive leases
//! (`ps-service`'s `master::rotation`): at each step the task pulls the columns of its slice
//! that its rows use, trains every row of the slice with plain SGD in the rows' order, pushes
//! the slice's change and hands the slice back. The next step's slice is leased and pulled
//! while the current one trains (pipelining). At the end the users' change goes to the PS, so
//! evaluation and `SAVE MODEL` see the whole model.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use angel_client::runtime::{Started, block_on, start};
use angel_client::{RotatePhase, RotateReply, RotateRequest};
use angel_optim::{Optimizer, builtin};

use crate::error::{Result, input_err};
use crate::model::Model;
use crate::rows::{Gathered, SparseRows};
use crate::sync::worker::fresh_id;

/// See the module documentation.
#[derive(Debug)]
pub struct RotationTask {
    model: Model,
    /// The rows of the task, batch after batch.
    rows: Vec<SparseRows>,
}

/// One slice's rows of a task, gathered.
struct Block {
    rows: SparseRows,
    gathered: Gathered,
    /// The gathered keys that belong to the rotated part, and their positions.
    rotated: Vec<(usize, u64)>,
}

impl Block {
    /// The block's rotated keys, ascending.
    fn rotated_keys(&self) -> Vec<u64> {
        self.rotated.iter().map(|&(_, k)| k).collect()
    }

    /// The weights of the block's gathered keys, weight row after weight row: the task's
    /// `users`' and the slice's pulled `items` (`weight_rows` rows each).
    fn weights(&self, weight_rows: usize, users: &Local, items: &[f32]) -> Vec<f32> {
        let (n, m) = (self.gathered.keys.len(), self.rotated.len());
        let mut weights = vec![0f32; weight_rows * n];
        for (slot, key) in self.gathered.keys.iter().enumerate() {
            if let Some(values) = users.values.get(key) {
                (0..weight_rows).for_each(|o| weights[o * n + slot] = values[o]);
            }
        }
        for (j, &(slot, _)) in self.rotated.iter().enumerate() {
            (0..weight_rows).for_each(|o| weights[o * n + slot] = items[o * m + j]);
        }
        weights
    }
}

/// A slice leased and pulled: its lease and the values of the block's rotated keys.
type Fetched = (RotateReply, Vec<f32>);

impl RotationTask {
    /// A rotation worker of model `model`.
    pub fn new(model: Model) -> Self {
        RotationTask {
            model,
            rows: Vec::new(),
        }
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Keeps `rows` for the statement's steps.
    pub fn add(&mut self, rows: SparseRows) {
        self.rows.push(rows);
    }

    /// Takes part in the statement's round: every step's slice, in the master's order;
    /// `progress` hears the rows and summed loss of each block. Returns the summed loss of
    /// the task's rows.
    pub fn run(&mut self, progress: impl FnMut(u64, f64)) -> Result<f64> {
        let (rotated, optimizer) = self.plan()?;
        let client = self.model.client().clone();
        let id = fresh_id();
        let joined = block_on(client.rotate(self.request(id, RotatePhase::Join, 0)))?;
        let trained = self.steps(id, joined.slices, (&rotated, optimizer), progress);
        // Left whatever happened, so the next statement starts a round of its own.
        let left = block_on(client.rotate(self.request(id, RotatePhase::Leave, 0)));
        let sum = trained?;
        left?;
        Ok(sum)
    }

    /// Every step of the round: see [`RotationTask::run`].
    fn steps(
        &mut self,
        id: u64,
        slices: u32,
        (rotated, optimizer): (&Range<u64>, &dyn Optimizer),
        mut progress: impl FnMut(u64, f64),
    ) -> Result<f64> {
        let client = self.model.client().clone();
        let rows = SparseRows::concat(std::mem::take(&mut self.rows));
        let blocks = self.blocks(&rows, rotated, slices as usize);
        let keys: Arc<Vec<Vec<u64>>> = Arc::new(blocks.iter().map(Block::rotated_keys).collect());
        let mut users = Local::pull(&self.model, own_keys(&rows, rotated))?;
        let mut sum = 0.0;
        let mut ahead = Some(self.fetch(id, 0, keys.clone()));
        for step in 0..slices {
            let (lease, items) = block_on(ahead.take().expect("started").join())?;
            if step + 1 < slices {
                ahead = Some(self.fetch(id, step + 1, keys.clone()));
            }
            let block = &blocks[lease.slice as usize];
            let loss = self.train(block, (&mut users, &items), optimizer)?;
            progress(block.rows.len() as u64, loss);
            sum += loss;
            block_on(client.rotate(self.request(id, RotatePhase::Release, step)))?;
        }
        users.push(&self.model)?;
        Ok(sum)
    }

    /// The columns the kind rotates and the optimizer the workers step with (plain SGD).
    fn plan(&self) -> Result<(Range<u64>, &'static dyn Optimizer)> {
        let spec = &self.model.spec;
        let Some(rotated) = spec.kind.rotated_columns() else {
            return input_err(format!(
                "model '{}': a {} model cannot train with parallelism = 'rotation'",
                self.model.name,
                spec.kind.name()
            ));
        };
        match (builtin::by_name(&spec.optimizer.name), self.model.group()) {
            (Some(sgd), 1) if sgd.name() == "sgd" => Ok((rotated, sgd)),
            _ => input_err(format!(
                "model '{}': parallelism = 'rotation' trains with plain SGD on the workers \
                 (Harp's), and the model's optimizer is '{}'; use optimizer = 'sgd'",
                self.model.name, spec.optimizer.name
            )),
        }
    }

    /// The rows of each of `slices` slices (a row's slice is that of its rotated key).
    fn blocks(&self, rows: &SparseRows, rotated: &Range<u64>, slices: usize) -> Vec<Block> {
        let width = rotated.end - rotated.start;
        let slice_of =
            |key: u64| ((key - rotated.start) as u128 * slices as u128 / width as u128) as usize;
        let mut members = vec![Vec::new(); slices];
        for r in 0..rows.len() {
            if let Some(&key) = rows.keys(r).iter().find(|k| rotated.contains(k)) {
                members[slice_of(key)].push(r);
            }
        }
        let bias = self.model.spec.bias_key();
        members
            .into_iter()
            .map(|members| {
                let rows = rows.select(&members);
                let gathered = rows.gather(0..rows.len(), bias);
                let rotated = (gathered.keys.iter().copied().enumerate())
                    .filter(|(_, k)| rotated.contains(k))
                    .collect();
                Block {
                    rows,
                    gathered,
                    rotated,
                }
            })
            .collect()
    }

    /// Starts leasing the slice of `step` and pulling the columns of it that the task's rows
    /// use (`keys`, per slice).
    fn fetch(&self, id: u64, step: u32, keys: Arc<Vec<Vec<u64>>>) -> Started<Fetched> {
        let client = self.model.client().clone();
        let (name, rows) = (self.model.name.clone(), self.model.weight_row_ids());
        let request = self.request(id, RotatePhase::Acquire, step);
        start(async move {
            let lease = client.rotate(request).await?;
            let keys = &keys[lease.slice as usize];
            let values = match keys.is_empty() {
                true => Vec::new(),
                false => client.pull_at(&name, &rows, keys, None).await?.0,
            };
            Ok((lease, values))
        })
    }

    /// Trains every row of `block` in order, one SGD step each, on the task's `users` and the
    /// slice's pulled `items`; pushes the slice's change. Returns the rows' summed loss.
    fn train(
        &self,
        block: &Block,
        (users, items): (&mut Local, &[f32]),
        sgd: &dyn Optimizer,
    ) -> Result<f64> {
        let weight_rows = self.model.spec.kind.weight_rows();
        let mut weights = block.weights(weight_rows, users, items);
        let sum = self.sgd_rows(block, &mut weights, sgd);
        users.keep(block, &weights, weight_rows);
        let keys = block.rotated_keys();
        if keys.is_empty() {
            return Ok(sum);
        }
        let (n, m) = (block.gathered.keys.len(), block.rotated.len());
        let deltas: Vec<f32> = (0..weight_rows)
            .flat_map(|o| {
                (block.rotated.iter().enumerate()).map(move |(j, &(slot, _))| (o, j, slot))
            })
            .map(|(o, j, slot)| weights[o * n + slot] - items[o * m + j])
            .collect();
        self.model.add(&keys, &deltas, None)?;
        Ok(sum)
    }

    /// One SGD step per row of `block`, in order, on `weights` (the block's gathered keys,
    /// weight row after weight row); returns the rows' summed loss, each taken before its step.
    fn sgd_rows(&self, block: &Block, weights: &mut [f32], sgd: &dyn Optimizer) -> f64 {
        let (kind, g) = (&*self.model.spec.kind, &block.gathered);
        let n = g.keys.len();
        let (mut margins, mut d) = (vec![0.0; kind.outputs()], vec![0.0; kind.outputs()]);
        let mut grads = vec![0.0f64; weights.len()];
        let mut sum = 0.0;
        for r in 0..block.rows.len() {
            kind.margins(&block.rows, r, g, weights, &mut margins);
            sum += kind.loss(block.rows.label(r), &margins, &mut d);
            kind.backprop((&block.rows, r, g), weights, &d, &mut grads);
            for (slot, _) in block.rows.row(r, g) {
                for o in 0..kind.weight_rows() {
                    let at = o * n + slot;
                    let mut w = [f64::from(weights[at])];
                    sgd.apply(
                        &mut w,
                        std::mem::take(&mut grads[at]),
                        &self.model.spec.optimizer,
                    );
                    weights[at] = w[0] as f32;
                }
            }
        }
        sum
    }

    fn request(&self, worker: u64, phase: RotatePhase, step: u32) -> RotateRequest {
        RotateRequest {
            model: self.model.name.clone(),
            worker,
            phase: phase as i32,
            step,
        }
    }
}

/// The task's own (not rotated) columns: their values as pulled and as trained.
struct Local {
    keys: Vec<u64>,
    pulled: Vec<f32>,
    values: HashMap<u64, Vec<f32>>,
}

impl Local {
    /// Pulls `keys` of `model`.
    fn pull(model: &Model, keys: Vec<u64>) -> Result<Self> {
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

    /// Keeps the trained values of the task's keys among `block`'s `weights`.
    fn keep(&mut self, block: &Block, weights: &[f32], weight_rows: usize) {
        let n = block.gathered.keys.len();
        for (slot, key) in block.gathered.keys.iter().enumerate() {
            if let Some(values) = self.values.get_mut(key) {
                (0..weight_rows).for_each(|o| values[o] = weights[o * n + slot]);
            }
        }
    }

    /// Adds the change since the pull to the model.
    fn push(&self, model: &Model) -> Result<()> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let n = self.keys.len();
        let rows = self.pulled.len() / n;
        let deltas: Vec<f32> = (0..rows)
            .flat_map(|o| (0..n).map(move |j| (o, j)))
            .map(|(o, j)| self.values[&self.keys[j]][o] - self.pulled[o * n + j])
            .collect();
        model.add(&self.keys, &deltas, None)
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
