//! [`RotationTask`]: one worker of model rotation (Harp's), for a model trained with
//! `parallelism = 'rotation'`.
//!
//! The task keeps its rows (its users' ratings, the statement's rows being split by user) and
//! its users' factors for the whole statement ([`crate::kept`]: a round's task takes them from the
//! previous round's). The model's rotated part (the item factors) is cut into slices that the
//! master hands out under exclusive leases (`ps-service`'s `master::rotation`): at each step
//! the task pulls the columns of its slice that its rows use, trains the slice's rows with
//! plain SGD in the rows' order, pushes the slice's change and hands the slice back. The next
//! step's slice is leased and pulled while the current one trains (pipelining). Under time
//! control a step stops when the lease's budget runs out and the block's other rows train in a
//! later round ([`pace`]). Each step's push is named after the worker's step. On Ballista it
//! carries the change of the users whose rows the step trained with the slice's: a run of
//! the task that takes its rank over (its executor died) starts at the first step the rank
//! had not handed back, with the users' factors as the lost run left them, and the servers
//! refuse a step pushed by both, so each rating trains once per round. Embedded, where a task
//! runs once, the users' change goes as one push at the round's end (users meet several
//! slices: pushing them per step tripled the bytes pushed and cost a quarter of the speed).
//!
//! - [`member`]: the worker's part in the master's schedule (shared with the topic model's
//!   rotation); [`block`]: the rows of one slice; [`local`]: the task's users' factors;
//!   [`pace`]: time control.

pub mod block;
pub mod local;
pub mod member;
pub mod pace;

use std::ops::Range;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use angel_client::RotateReply;
use angel_client::runtime::{Started, block_on, start};
use arrow::array::{ArrayData, ArrayRef};

use crate::error::{Result, input_err};
use crate::kept::Kept;
use crate::kinds::Rotating;
use crate::model::Model;
use crate::rows::SparseRows;
use crate::task_pass::{Progress, TaskPass, Trained};
use block::Block;
use local::Local;
use member::Member;
use pace::{CHUNK, Cursors, Pace};

/// Where each block's rows resume under time control, for this process's tasks.
static CURSORS: LazyLock<Cursors> = LazyLock::new(Cursors::default);

/// See the module documentation.
#[derive(Debug)]
pub struct RotationTask {
    model: Model,
    /// The function the rows come through, for errors in them.
    function: &'static str,
    /// The task's rows, batch after batch: each batch's label array, then its input arrays.
    batches: Vec<Vec<ArrayRef>>,
    kept: Kept,
}

/// A slice leased and pulled: its lease and the values of the block's rotated keys.
type Fetched = (RotateReply, Vec<f32>);

/// What a worker keeps from round to round: its blocks (one per slice), the rotated keys of
/// each, and its users' factors as last pushed.
struct RotationWorker {
    blocks: Vec<Block>,
    keys: Arc<Vec<Vec<u64>>>,
    users: Local,
}

impl RotationTask {
    /// A rotation worker of model `model`, reading rows that come through `function`, taking
    /// its state from (and leaving it in) `kept`.
    pub fn new(model: Model, function: &'static str, kept: Kept) -> Self {
        RotationTask {
            model,
            function,
            batches: Vec::new(),
            kept,
        }
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Keeps a batch of rows (its `label` and `inputs` arrays, as the model's kind reads
    /// them) for the round.
    pub fn add(&mut self, label: &ArrayRef, inputs: &[ArrayRef]) {
        let arrays = std::iter::once(label).chain(inputs).cloned().collect();
        self.batches.push(arrays);
    }

    /// Takes part in the statement's round: every step's slice, in the master's order;
    /// `progress` hears the rows and summed loss of each step (each row counted once per SGD
    /// step).
    pub fn run(&mut self, progress: impl FnMut(u64, f64)) -> Result<Trained> {
        let rotating = self.plan()?;
        Member::round(&self.model, |member| self.round(member, rotating, progress))
    }

    /// The round's steps with the task's worker state, kept for the next round after.
    fn round(
        &self,
        member: &Member,
        rotating: &dyn Rotating,
        progress: impl FnMut(u64, f64),
    ) -> Result<Trained> {
        let arrays: Vec<ArrayData> = self.batches.iter().flatten().map(|a| a.to_data()).collect();
        let slices = member.joined.slices as usize;
        let mut worker = match self.kept.take::<RotationWorker>(&self.model.name, &arrays) {
            Some(worker) if worker.blocks.len() == slices => worker,
            _ => {
                tracing::debug!(model = %self.model.name, "rotation worker reads its rows");
                self.worker(&rotating.rotated_columns(), slices)?
            }
        };
        let trained = self.steps(member, &mut worker, rotating, progress)?;
        // Embedded, the users' change goes now; on Ballista each step's push took its part.
        let (keys, deltas) = worker.users.take_change(&worker.users.keys());
        if !member.may_run_again && !keys.is_empty() {
            let change = member.change(member.joined.slices);
            self.model.add(&keys, &deltas, Some(change))?;
        }
        self.kept
            .put(&self.model.name, member.joined.round, arrays, worker);
        Ok(trained)
    }

    /// The task's state read afresh: its rows in blocks of `slices` slices of the `rotated`
    /// columns, and its users' factors pulled.
    fn worker(&self, rotated: &Range<u64>, slices: usize) -> Result<RotationWorker> {
        let kind = (self.model.spec).gradient(self.function, &self.model.name)?;
        let read = (self.batches.iter())
            .map(|b| kind.read_rows(self.function, Some(&b[0]), &b[1..]))
            .collect::<Result<Vec<_>>>()?;
        let rows = SparseRows::concat(read);
        let blocks = Block::split(&rows, rotated, slices, self.model.spec.bias_key());
        let keys = Arc::new(blocks.iter().map(Block::rotated_keys).collect());
        let users = Local::pull(&self.model, &rows, rotated)?;
        Ok(RotationWorker {
            blocks,
            keys,
            users,
        })
    }

    /// Every step of the round: see [`RotationTask::run`].
    fn steps(
        &self,
        member: &Member,
        worker: &mut RotationWorker,
        rotating: &dyn Rotating,
        mut progress: impl FnMut(u64, f64),
    ) -> Result<Trained> {
        let mut total = Trained::default();
        let (first, slices) = (member.joined.first_step, member.joined.slices);
        let mut ahead = Some(self.fetch(member, first, worker.keys.clone()));
        for step in first..slices {
            let (lease, items) = block_on(ahead.take().expect("started").join())?;
            if step + 1 < slices {
                ahead = Some(self.fetch(member, step + 1, worker.keys.clone()));
            }
            let block = &worker.blocks[lease.slice as usize];
            let pace = Pace::start(lease.budget_us, member.slowdown);
            let busy = Instant::now();
            let step_of = (member, step, rotating, pace);
            let trained = self.train(block, (&mut worker.users, &items), step_of)?;
            progress(trained.rows, trained.loss);
            total += trained;
            member.release(step, trained.rows, busy.elapsed())?;
        }
        Ok(total)
    }

    /// How the kind rotates, once the model is known to train with plain SGD (the steps'
    /// optimizer).
    fn plan(&self) -> Result<&dyn Rotating> {
        let spec = &self.model.spec;
        let Some(rotating) = spec.kind.rotating() else {
            return input_err(format!(
                "model '{}': a {} model cannot train with parallelism = 'rotation'",
                self.model.name,
                spec.kind.name()
            ));
        };
        match (spec.optimizer.name.as_str(), self.model.group()) {
            ("sgd", 1) => Ok(rotating),
            _ => input_err(format!(
                "model '{}': parallelism = 'rotation' trains with plain SGD on the workers \
                 (Harp's), and the model's optimizer is '{}'; use optimizer = 'sgd'",
                self.model.name, spec.optimizer.name
            )),
        }
    }

    /// Starts leasing the slice of `step` and pulling the columns of it that the task's rows
    /// use (`keys`, per slice).
    fn fetch(&self, member: &Member, step: u32, keys: Arc<Vec<Vec<u64>>>) -> Started<Fetched> {
        let client = self.model.client().clone();
        let (name, rows) = (self.model.name.clone(), self.model.weight_row_ids());
        let acquire = member.acquire(step);
        start(async move {
            let lease = acquire.await?;
            let keys = &keys[lease.slice as usize];
            let values = match keys.is_empty() {
                true => Vec::new(),
                false => client.pull_at(&name, &rows, keys, None).await?.0,
            };
            Ok((lease, values))
        })
    }

    /// Trains `block`'s rows, one SGD step each, on the task's `users` and the slice's pulled
    /// `items`, from where the block last stopped, until all are trained or `pace` stops the
    /// step; pushes the change of the slice (and on Ballista of the block's users) as the
    /// member's change of `step`.
    fn train(
        &self,
        block: &Block,
        (users, items): (&mut Local, &[f32]),
        (member, step, rotating, pace): (&Member, u32, &dyn Rotating, Pace),
    ) -> Result<Trained> {
        let weight_rows = self.model.spec.kind.weight_rows();
        let mut weights = block.weights(weight_rows, users, items);
        let name = &self.model.name;
        let from = CURSORS.get(name, block.fingerprint);
        let trained = self.sgd_rows(block, &mut weights, rotating, (from, pace));
        let len = block.rows.len().max(1);
        CURSORS.set(
            name,
            block.fingerprint,
            (from + trained.rows as usize) % len,
        );
        users.keep(&block.gathered.keys, &weights, weight_rows);
        let slice = (
            block.rotated_keys(),
            block.deltas(weight_rows, &weights, items),
        );
        let own = match member.may_run_again {
            true => users.take_change(&block.gathered.keys),
            false => (Vec::new(), Vec::new()),
        };
        let (keys, deltas) = merged(weight_rows, slice, own);
        if !keys.is_empty() {
            self.model.add(&keys, &deltas, Some(member.change(step)))?;
        }
        Ok(trained)
    }

    /// One SGD step per row of `block` on `weights` (the block's gathered keys, key after
    /// key), in order from row `from` and around, until every row had its step or `pace`
    /// ends the step.
    fn sgd_rows(
        &self,
        block: &Block,
        weights: &mut [f32],
        rotating: &dyn Rotating,
        (from, mut pace): (usize, Pace),
    ) -> Trained {
        let (g, len) = (&block.gathered, block.rows.len());
        let params = &self.model.spec.optimizer;
        let mut trained = Trained::default();
        for r in (0..len).map(|k| (from + k) % len) {
            trained.loss += rotating.sgd_step((&block.rows, r, g), weights, params);
            trained.rows += 1;
            if trained.rows % CHUNK as u64 == 0 && !pace.go_on() {
                return trained;
            }
        }
        if trained.rows % CHUNK as u64 != 0 {
            pace.go_on();
        }
        trained
    }
}

/// Two changes of disjoint ascending keys (each weight row after weight row, `rows` of them)
/// as one, its keys ascending.
fn merged(rows: usize, a: (Vec<u64>, Vec<f32>), b: (Vec<u64>, Vec<f32>)) -> (Vec<u64>, Vec<f32>) {
    let mut order: Vec<(u64, &[f32], usize, usize)> = [&a, &b]
        .into_iter()
        .flat_map(|(keys, deltas)| {
            (keys.iter().enumerate()).map(|(j, &k)| (k, deltas.as_slice(), keys.len(), j))
        })
        .collect();
    order.sort_unstable_by_key(|&(k, ..)| k);
    let deltas = (0..rows)
        .flat_map(|o| order.iter().map(move |&(_, d, n, j)| d[o * n + j]))
        .collect();
    (order.iter().map(|&(k, ..)| k).collect(), deltas)
}

/// Keeps the rows as they come; trains them in the round when they end. Under time control a
/// round trains some rows more than once, others not: it counts what it trained.
impl TaskPass for RotationTask {
    fn add(&mut self, columns: &[ArrayRef], _: Progress) -> Result<Trained> {
        let (label, inputs) = self.model.label_and_inputs(self.function, columns)?;
        RotationTask::add(self, label, inputs);
        Ok(Trained::default())
    }

    fn finish(&mut self, progress: Progress) -> Result<Trained> {
        self.run(progress)
    }
}
