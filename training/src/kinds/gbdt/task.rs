//! [`TreeTask`]: one worker's round in a boosted model's statement.
//!
//! `CREATE MODEL` runs the rounds one after the other, and between two rounds [`Grower`]
//! finishes what the workers pushed; each round every worker does its round's part:
//!
//! - round 0: reads its rows and pushes their sketch (the mean target comes back as the
//!   round's answer);
//! - the round starting a tree: bins its rows under the cuts (before the first tree), adds
//!   the finished tree's leaves to its margins (after it), and for the new tree pushes its
//!   rows' gradient and hessian sums and the root's histogram; it answers its rows' loss;
//! - the other rounds: moves its rows down the layer of splits the tree row shows and pushes
//!   the histograms of the children the workers build.
//!
//! The worker's state ([`TreeWorker`]) stays in the job's memory from round to round ([`Kept`]).
//! Where the rows come as new batches every round (on Ballista, or with tables on disk) the
//! process keeps it by the rows' content instead ([`resident`]), and a worker kept some rounds
//! ago, or none, is brought forward from the trees on the servers: every round's state
//! follows from the rows and the trees alone.
//!
//! [`Grower`]: super::grower::Grower

use arrow::array::{ArrayData, ArrayRef};

use super::Gbdt;
use super::grower::{Names, ROUND_ROW, histogram_row};
use super::grown;
use super::resident;
use super::sketch::Cuts;
use super::tree::Tree;
use super::worker::{Histograms, TreeWorker};
use crate::error::Result;
use crate::kept::Kept;
use crate::model::Model;
use crate::rows::SparseRows;
use crate::task_pass::{Progress, TaskContext, TaskPass, Trained};
use angel_client::PushOptions;
use angel_client::runtime::block_on;

/// Most values one push of histograms sends (64 MiB).
const PUSH_VALUES: usize = 1 << 23;

/// See the module documentation.
#[derive(Debug)]
pub struct TreeTask {
    model: Model,
    gbdt: Gbdt,
    names: Names,
    /// The function the rows come through, for errors in them.
    function: &'static str,
    /// The task's rows, batch after batch: each batch's `label, indices [, values]` arrays.
    batches: Vec<Vec<ArrayRef>>,
    kept: Kept,
}

/// What a worker's round measured: its rows and the sum over them of their target (round
/// 0) or of their loss (a round starting a tree); no rows in the other rounds.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct RoundSums {
    pub rows: u64,
    pub sum: f64,
}

impl TreeTask {
    /// A worker of boosted model `model` of options `gbdt`, reading rows that come through
    /// the context's function, keeping its state in the context's [`Kept`].
    pub fn new(model: Model, gbdt: Gbdt, context: &TaskContext) -> Self {
        TreeTask {
            names: Names::of(&model.name),
            model,
            gbdt,
            function: context.function,
            batches: Vec::new(),
            kept: context.kept.clone(),
        }
    }

    /// Keeps a batch of rows (its `label, indices [, values]` arrays) for the round.
    pub fn add(&mut self, inputs: &[ArrayRef]) {
        self.batches.push(inputs.to_vec());
    }

    /// Runs the worker's part of the current round.
    pub fn run(&mut self) -> Result<RoundSums> {
        let name = self.model.name.clone();
        let arrays: Vec<ArrayData> = self.batches.iter().flatten().map(|a| a.to_data()).collect();
        if arrays.is_empty() {
            return Ok(RoundSums::default());
        }
        // A worker the job kept by its batches is the previous round's: no need to ask.
        let kept = self.kept.take::<TreeWorker>(&name, &arrays);
        let round = match &kept {
            Some(worker) => worker.round + 1,
            None => self.round()?,
        };
        // Jobs that keep workers by their batches (embedded, rows in memory) set a round.
        let by_batches = self.kept.round(&name).is_some();
        let (mut worker, resident) = match kept {
            Some(worker) => (worker, None),
            None => {
                let rows = self.rows()?;
                let key = (!by_batches)
                    .then(|| self.resident_key(&rows))
                    .transpose()?;
                let found = (key.as_ref().and_then(resident::take)).filter(|w| w.round < round);
                let worker = match (round, found) {
                    (0, _) => TreeWorker::new(&self.gbdt, rows),
                    (_, Some(w)) if w.round + 1 == round => w,
                    (_, found) => self.bring_forward(found, rows)?,
                };
                (worker, key)
            }
        };
        let done = match round {
            0 => self.sketch(&worker)?,
            _ => self.grow_round(&mut worker)?,
        };
        worker.round = round;
        match resident {
            Some(key) => resident::put(key, worker),
            None => self.kept.put(&name, round, arrays, worker),
        }
        Ok(done)
    }

    /// The task's rows, checked.
    fn rows(&self) -> Result<SparseRows> {
        let read = (self.batches.iter())
            .map(|b| {
                let rows = SparseRows::from_arrays(self.function, Some(&b[0]), &b[1], b.get(2))?;
                rows.check(self.function, &self.model.name, self.model.spec.dim)?;
                Ok(rows)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SparseRows::concat(read))
    }

    /// Where this statement's worker of `rows` is kept in the process ([`resident`]).
    fn resident_key(&self, rows: &SparseRows) -> Result<resident::Key> {
        let client = self.model.client();
        Ok(resident::Key {
            model: client.qualify(&self.model.name),
            statement: block_on(client.matrix(&self.names.totals))?.meta.id,
            content: rows.content_hash(),
        })
    }

    /// Round 0: pushes the sketch of the worker's rows.
    fn sketch(&self, worker: &TreeWorker) -> Result<RoundSums> {
        let (counts, targets) = worker.sketch();
        let (keys, counts) = counts.into_push();
        self.push(&self.names.sketch, &[0], &keys, &counts)?;
        Ok(RoundSums {
            rows: worker.len() as u64,
            sum: targets,
        })
    }

    /// A worker for the round after the one that left `found` (kept in this process some
    /// rounds ago), or a new one of `rows`, brought from the trees on the servers to where
    /// the round before left its rows' workers: on Ballista the task that holds these rows
    /// may have run elsewhere, or run again after its executor died. The draws of the samples
    /// follow the rows' content, so it is the same worker whichever task held them.
    fn bring_forward(&self, found: Option<TreeWorker>, rows: SparseRows) -> Result<TreeWorker> {
        let client = self.model.client();
        let grown = block_on(grown::rows(client, &self.names.trees))?;
        let trees: Vec<u64> = (0..grown.min(self.gbdt.trees as u64)).collect();
        let values = block_on(client.pull_rows::<f64>(&self.names.trees, &trees))?;
        let trees: Vec<Tree> = values.iter().map(|r| Tree::from_row(r)).collect();
        let growing = trees.iter().position(|t| !t.done);
        let from = found.as_ref().map(|w| w.round);
        tracing::debug!(model = %self.model.name, ?from, ?growing, "bringing a worker forward");
        let mut rows = Some(rows);
        let mut worker =
            found.unwrap_or_else(|| TreeWorker::new(&self.gbdt, rows.take().expect("rows")));
        // Before the first tree's first round the step starts the worker itself.
        if !(trees[0].done || trees[0].split_layers() > 0) {
            return Ok(worker);
        }
        let dim = self.model.spec.dim;
        let cuts = self.cuts()?;
        if !worker.started() {
            worker.start(self.function, &cuts, trees[0].offset)?;
        }
        if !worker.catch_up(&self.gbdt, &trees, dim) {
            let rows = rows
                .take()
                .expect("a worker found here is never ahead of a new one");
            worker = TreeWorker::new(&self.gbdt, rows);
            worker.start(self.function, &cuts, trees[0].offset)?;
            worker.catch_up(&self.gbdt, &trees, dim);
        }
        Ok(worker)
    }

    /// The round the statement runs, as the servers count it.
    fn round(&self) -> Result<u32> {
        let client = self.model.client();
        let totals = &self.names.totals;
        let round = block_on(client.pull_keys::<f64>(totals, ROUND_ROW, &[0]))?;
        Ok(round[0] as u32)
    }

    /// A round after the first (see the module documentation).
    fn grow_round(&self, worker: &mut TreeWorker) -> Result<RoundSums> {
        let trees = self.gbdt.trees;
        let (t, layer) = match worker.at {
            None => {
                let cuts = self.cuts()?;
                worker.start(self.function, &cuts, self.tree(0)?.offset)?;
                return self.begin(worker, 0);
            }
            Some(at) if at.0 < trees => at,
            Some(_) => return Ok(RoundSums::default()),
        };
        let tree = self.tree(t)?;
        if tree.done {
            worker.finish_tree(&tree);
            if t + 1 < trees {
                return self.begin(worker, t + 1);
            }
            worker.at = Some((trees, 0));
            return Ok(self.loss(worker));
        }
        let built = worker.descend(&tree, layer);
        worker.at = Some((t, layer + 1));
        self.push_histograms(worker, &built)?;
        Ok(RoundSums::default())
    }

    /// Starts tree `t`: pushes the root's sums and histogram; answers the loss before it.
    fn begin(&self, worker: &mut TreeWorker, t: usize) -> Result<RoundSums> {
        let loss = self.loss(worker);
        let (g, h) = worker.begin_tree(&self.gbdt, t, self.model.spec.dim);
        self.push(&self.names.totals, &[0], &[0, 1], &[g, h])?;
        self.push_histograms(worker, &[0])?;
        Ok(loss)
    }

    fn loss(&self, worker: &TreeWorker) -> RoundSums {
        RoundSums {
            rows: worker.len() as u64,
            sum: worker.loss(&self.gbdt),
        }
    }

    /// Pushes the histograms of `nodes` (each into its row).
    fn push_histograms(&self, worker: &mut TreeWorker, nodes: &[usize]) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        let hist = &self.names.histograms;
        let width = block_on(self.model.client().matrix(hist))?.meta.cols;
        let dim = width / (2 * self.gbdt.bins as u64);
        let Histograms { keys, values } = worker.histograms(nodes, dim, self.gbdt.bins);
        let rows: Vec<u64> = (nodes.iter())
            .map(|&n| histogram_row(self.gbdt.depth, n))
            .collect();
        // In pushes of at most PUSH_VALUES values: a wide layer's would pass a message's limit.
        let per_push = (PUSH_VALUES / rows.len()).max(1);
        if keys.len() <= per_push {
            return self.push(hist, &rows, &keys, &values);
        }
        for start in (0..keys.len()).step_by(per_push) {
            let end = (start + per_push).min(keys.len());
            let part: Vec<f64> = (0..rows.len())
                .flat_map(|r| &values[r * keys.len() + start..r * keys.len() + end])
                .copied()
                .collect();
            self.push(hist, &rows, &keys[start..end], &part)?;
        }
        Ok(())
    }

    /// The cuts of every feature.
    fn cuts(&self) -> Result<Cuts> {
        let client = self.model.client();
        let values = block_on(client.pull_rows::<f64>(&self.names.cuts, &[0]))?;
        Ok(Cuts {
            bins: self.gbdt.bins,
            values: values.into_iter().next().unwrap_or_default(),
        })
    }

    /// Tree `t` as its row holds it now.
    fn tree(&self, t: usize) -> Result<Tree> {
        let client = self.model.client();
        let rows = block_on(client.pull_rows::<f64>(&self.names.trees, &[t as u64]))?;
        Ok(Tree::from_row(&rows[0]))
    }

    fn push<T: angel_client::Element>(
        &self,
        matrix: &str,
        rows: &[u64],
        keys: &[u64],
        values: &[T],
    ) -> Result<()> {
        let client = self.model.client();
        let how = PushOptions::default();
        block_on(client.push_with::<T>(matrix, rows, keys, values, how))?;
        Ok(())
    }
}

/// Keeps the rows as they come; runs the worker's part of the round when they end, and
/// answers its rows and their summed target or loss.
impl TaskPass for TreeTask {
    fn add(&mut self, columns: &[ArrayRef], _: Progress) -> Result<Trained> {
        TreeTask::add(self, columns);
        Ok(Trained::default())
    }

    fn finish(&mut self, progress: Progress) -> Result<Trained> {
        let round = self.run()?;
        progress(round.rows, round.sum);
        Ok(Trained {
            rows: round.rows,
            loss: round.sum,
        })
    }
}
