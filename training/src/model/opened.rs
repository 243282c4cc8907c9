//! [`Model`], a model opened on the service by a task: pull, push, gradients, predictions.

use std::ops::Range;
use std::sync::Arc;

use angel_client::runtime::{Started, block_on, start};
use angel_client::{Ack, PsClient, PushOptions, TaskChange, WorkerClock};
use arrow::array::ArrayRef;

use super::Model;
use crate::error::{Result, input_err};
use crate::kinds::{Gradient, Inputs};
use crate::rows::{Gathered, SparseRows};

impl Model {
    /// Current weights of `keys` (a pruned pull), output after output.
    pub fn weights(&self, keys: &[u64]) -> Result<Vec<f32>> {
        Ok(self.pull(keys, None)?.0)
    }

    /// [`Model::weights`] pulled by a training worker at its clock (`clock`), with the
    /// versions of the partitions read (a DynSGD push states them back).
    pub fn pull(&self, keys: &[u64], clock: Option<WorkerClock>) -> Result<(Vec<f32>, Vec<Ack>)> {
        Ok(block_on(
            self.client.pull_at(&self.name, &self.rows, keys, clock),
        )?)
    }

    /// Starts [`Model::pull`] of `keys` and returns at once: the pull of a training task's
    /// next mini-batch, in flight while it computes the current one.
    pub fn pull_ahead(&self, keys: Vec<u64>, clock: WorkerClock) -> Started<(Vec<f32>, Vec<Ack>)> {
        let (client, name, rows) = (self.client.clone(), self.name.clone(), self.rows.clone());
        start(async move { client.pull_at(&name, &rows, &keys, Some(clock)).await })
    }

    /// Sends gradients of `keys` (output after output), computed from the partition versions
    /// `bases`; the servers apply the model's optimizer, with the change scaled as its update
    /// rule says (ConSGD: 1/W; DynSGD: by staleness). A task's `change` name makes the push
    /// one a rerun of the task repeats without effect.
    pub fn update(
        &self,
        keys: &[u64],
        grads: &[f32],
        change: Option<TaskChange>,
        bases: &[Ack],
    ) -> Result<()> {
        let how = PushOptions {
            gradients: true,
            change,
            bases,
        };
        Ok(block_on(
            self.client
                .push_with(&self.name, &self.rows, keys, grads, how),
        )?)
    }

    /// Every row of the model, output after output: the weights, then the optimizer's state.
    fn all_rows(&self) -> Vec<u64> {
        (0..self.rows.len() as u64 * self.group).collect()
    }

    /// The matrix's rows of weights (without the optimizer's state rows).
    pub fn weight_row_ids(&self) -> Vec<u64> {
        self.rows.clone()
    }

    /// Rows per output: the weights and the optimizer's state.
    pub fn group(&self) -> usize {
        self.group as usize
    }

    /// Values of `keys` in every row (output after output: the weights, then the state) at a training worker's clock
    /// (`clock`), row after row: what model averaging's local rounds start from.
    pub fn pull_all(&self, keys: &[u64], clock: Option<WorkerClock>) -> Result<Vec<f32>> {
        let rows = self.all_rows();
        let pulled = block_on(self.client.pull_at(&self.name, &rows, keys, clock))?;
        Ok(pulled.0)
    }

    /// Adds `deltas` of `keys` to every row (as [`Model::pull_all`] orders them),
    /// bypassing the optimizer (model averaging).
    pub fn add(&self, keys: &[u64], deltas: &[f32], change: Option<TaskChange>) -> Result<()> {
        let how = PushOptions {
            change,
            ..Default::default()
        };
        let rows = self.all_rows();
        Ok(block_on(
            self.client.push_with(&self.name, &rows, keys, deltas, how),
        )?)
    }

    /// The summed loss of rows `range` of `rows` under `weights` (of `g.keys`, weight row
    /// after weight row), and the gradient of their mean loss (or summed, as the kind says)
    /// per weight row and key.
    pub fn gradients(
        &self,
        rows: &SparseRows,
        range: Range<usize>,
        g: &Gathered,
        weights: &[f32],
    ) -> Result<(f64, Vec<f32>)> {
        let n = range.len();
        let (loss, grads) = self.summed_gradients(rows, range, g, weights)?;
        let kind = self.spec.gradient("ps_train", &self.name)?;
        let scale = match kind.mean_gradient() {
            true => 1.0 / n as f64,
            false => 1.0,
        };
        Ok((loss, grads.iter().map(|&x| (x * scale) as f32).collect()))
    }

    /// The summed loss of rows `range` of `rows` under `weights` (of `g.keys`, weight row
    /// after weight row), and the summed gradient of their losses, laid out as `weights`.
    pub fn summed_gradients(
        &self,
        rows: &SparseRows,
        range: Range<usize>,
        g: &Gathered,
        weights: &[f32],
    ) -> Result<(f64, Vec<f64>)> {
        let kind = self.spec.gradient("ps_train", &self.name)?;
        let outputs = self.spec.kind.outputs();
        let (mut margins, mut d) = (vec![0.0; outputs], vec![0.0; outputs]);
        let mut grads = vec![0.0f64; weights.len()];
        let mut loss = 0.0;
        for r in range {
            kind.margins(rows, r, g, weights, &mut margins);
            loss += kind.loss(rows.label(r), &margins, &mut d);
            kind.backprop((rows, r, g), weights, &d, &mut grads);
        }
        Ok((loss, grads))
    }

    /// `each(scoring, row, margins)` of every row of `rows`, from the margins its kind
    /// computes: what predictions and per-row losses are made of.
    pub fn per_row<T>(
        &self,
        function: &str,
        rows: &SparseRows,
        mut each: impl FnMut(&dyn Gradient, usize, &[f64]) -> T,
    ) -> Result<Vec<T>> {
        let scoring = self.spec.gradient(function, &self.name)?;
        rows.check(function, &self.name, self.spec.dim)?;
        let margins = self.spec.kind.margins_of(self, function, rows)?;
        let outputs = self.spec.kind.outputs();
        Ok((margins.chunks(outputs).enumerate())
            .map(|(r, m)| each(scoring, r, m))
            .collect())
    }

    /// Every row's margins `w_o . x + b_o` (one per output, row after row, as the kind's
    /// gradient computes them), after one pruned pull of the weights of their distinct keys.
    pub fn linear_margins(&self, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        let kind = self.spec.gradient(function, &self.name)?;
        let g = rows.gather(0..rows.len(), self.spec.bias_key());
        let weights = self.weights(&g.keys)?;
        let outputs = self.spec.kind.outputs();
        let mut margins = vec![0.0; rows.len() * outputs];
        for (r, out) in margins.chunks_mut(outputs).enumerate() {
            kind.margins(rows, r, &g, &weights, out);
        }
        Ok(margins)
    }

    /// The prediction of every row of `rows` (`ps_predict`): a probability, a margin, a
    /// class or (k-means) the nearest centre, as the kind says.
    pub fn predict(&self, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        self.spec.kind.predictions(self, function, rows)
    }

    /// The class probabilities of every row of `rows` (`ps_predict_proba`); an error naming
    /// the kind when it predicts none.
    pub fn probabilities(&self, function: &str, rows: &SparseRows) -> Result<Vec<Vec<f64>>> {
        let kind = self.spec.gradient(function, &self.name)?;
        if kind
            .probabilities(&vec![0.0; self.spec.kind.outputs()])
            .is_none()
        {
            return input_err(format!(
                "{function}: model '{}' is a {} model, which predicts no probabilities; use \
                 ps_predict",
                self.name,
                self.spec.kind.name()
            ));
        }
        self.per_row(function, rows, |kind, _, m| {
            kind.probabilities(m).unwrap_or_default()
        })
    }

    /// The loss of every row of `rows` (labelled) under the model (`ps_loss`).
    pub fn losses(&self, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        let kind = self.spec.gradient(function, &self.name)?;
        rows.check_labels(function, &self.name, |l| kind.refuse_label(l))?;
        let mut d = vec![0.0; self.spec.kind.outputs()];
        self.per_row(function, rows, |kind, r, m| {
            kind.loss(rows.label(r), m, &mut d)
        })
    }

    /// The process's client of the model's service.
    pub fn client(&self) -> &Arc<PsClient> {
        &self.client
    }

    /// Refuses the model for `function`, which takes `wanted` only ("a topic model").
    pub fn refuse<T>(&self, function: &str, wanted: &str) -> Result<T> {
        input_err(format!(
            "{function}: model '{}' is a {} model, not {wanted}",
            self.name,
            self.spec.kind.name()
        ))
    }

    /// The label and the input columns of a call's `columns`, as a kind trained by gradients
    /// reads them: `label, indices [, values]` or `user, item, rating`.
    pub fn label_and_inputs<'a>(
        &self,
        function: &str,
        columns: &'a [ArrayRef],
    ) -> Result<(&'a ArrayRef, &'a [ArrayRef])> {
        match (self.spec.kind.inputs(), columns) {
            (Inputs::Features, [label, inputs @ ..]) if !inputs.is_empty() => Ok((label, inputs)),
            (Inputs::Pairs, [_, _, rating]) => Ok((rating, &columns[..2])),
            (inputs, _) => input_err(format!(
                "{function}: model '{}' is a {} model, whose rows are {}; got {} columns",
                self.name,
                self.spec.kind.name(),
                inputs.describe(),
                columns.len()
            )),
        }
    }
}
