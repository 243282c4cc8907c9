//! The kinds of model, one folder each, each implementing the model interface (`ModelKind`,
//! in `model/`); the registry lists them by the names `kind = '...'` selects them with. This
//! file holds what kinds implement beside it: [`Gradient`] (a kind trained by gradients),
//! [`Ranking`], [`Rotating`], and the [`Metric`]s and [`Inputs`] they name. No kind imports
//! another, or the registry.
//!
//! - [`linear`]: logistic regression, linear regression, the linear SVM;
//! - [`softmax`]: multinomial logistic regression over `classes` classes;
//! - [`fm`]: factorization machines, a linear model plus every pair of features' interaction;
//! - [`mf`]: matrix factorization of (user, item, rating) rows;
//! - [`lda`]: the topic model (latent Dirichlet allocation), trained by Gibbs sampling;
//! - [`gbdt`]: gradient-boosted decision trees, split where their histograms are;
//! - [`kmeans`]: k-means clustering, by Lloyd's algorithm.
//!
//! # Adding a kind
//!
//! 1. A type implementing `ModelKind` (its options, its matrix) and, for a kind trained by
//!    gradients, [`Gradient`] (its loss and the loss's derivative per output, its prediction,
//!    its metrics), and its tests: here, a folder `kinds/<name>/`.
//! 2. Its names in the registry: one line in its `KINDS`, or `register` for a program's own
//!    kind (`examples/src/poisson.rs`).
//!
//! `CREATE MODEL`, `ps_train`, `ps_predict`, `ps_predict_proba`, `ps_loss`, `SAVE MODEL` and
//! `LOAD MODEL` then work with it: they dispatch through the interface. A kind trained by
//! gradients gets its worker half, its driver half and its saved format (the interface's
//! `Trains`) from `gradient.rs`; a kind trained otherwise implements `Trains` itself: its
//! worker half (`open_pass`), its driver half (`drive`, and `ModelKind::start`) and its
//! saved format (`saved_tables`, `save`, `load`).

pub mod fm;
pub mod gbdt;
pub mod kmeans;
pub mod lda;
pub mod linear;
pub mod mf;
pub mod softmax;

use arrow::array::ArrayRef;

use crate::error::Result;
use crate::rows::{Gathered, SparseRows};

/// A kind trained by gradients: how it reads its rows, turns weights into a row's margins
/// and its loss into gradients, and what it predicts. A training step pulls the weights of
/// the keys a mini-batch uses, asks the kind for each row's loss and its derivative with
/// respect to each margin, and pushes the gradients that follow to the servers' optimizer.
pub trait Gradient {
    /// Reads the rows of a call: the `label` column (training, loss) and the `inputs`
    /// columns, as the kind's `inputs` says.
    fn read_rows(
        &self,
        function: &str,
        label: Option<&ArrayRef>,
        inputs: &[ArrayRef],
    ) -> Result<SparseRows> {
        SparseRows::from_arrays(function, label, &inputs[0], inputs.get(1))
    }

    /// Row `r`'s margins (into `out`) under `weights` of the gathered keys `g`, weight row
    /// after weight row: `w_o . x + b_o` unless the kind says otherwise.
    fn margins(&self, rows: &SparseRows, r: usize, g: &Gathered, weights: &[f32], out: &mut [f64]) {
        rows.margins(r, g, weights, out);
    }

    /// Adds to `grads` (laid out as `weights`) the gradient of row `r`'s loss, given `d`, the
    /// loss's derivative with respect to each margin.
    fn backprop(
        &self,
        (rows, r, g): (&SparseRows, usize, &Gathered),
        weights: &[f32],
        d: &[f64],
        grads: &mut [f64],
    ) {
        let _ = weights;
        let n = g.keys.len();
        for (o, &d) in d.iter().enumerate().filter(|(_, d)| **d != 0.0) {
            rows.add_gradient(r, g, d, &mut grads[o * n..(o + 1) * n]);
        }
    }

    /// Whether a mini-batch pushes the mean of its rows' gradients (`true`) or their sum
    /// (matrix factorization: each rating one SGD step, as its users expect).
    fn mean_gradient(&self) -> bool {
        true
    }

    /// Why `label` cannot be learnt, if it cannot (softmax labels are classes `0..N-1`).
    fn refuse_label(&self, label: f64) -> Option<String> {
        let _ = label;
        None
    }

    /// The loss of one row of `label` with `margins` (one per output), writing the loss's
    /// derivative with respect to each margin into `d`.
    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64;

    /// What `ps_predict` answers for a row's margins.
    fn predict(&self, margins: &[f64]) -> f64;

    /// What `ps_predict_proba` answers for a row's margins: the class probabilities, or
    /// `None` for a kind that predicts none (regression, SVM).
    fn probabilities(&self, margins: &[f64]) -> Option<Vec<f64>>;

    /// The holdout metrics the epoch table reports beside the loss.
    fn metrics(&self) -> &'static [Metric];
}

/// A kind that ranks one side of its model for the other (matrix factorization: items for a
/// user), from the two columns' weights.
pub trait Ranking {
    /// The columns ranked for (every user's).
    fn subjects(&self) -> std::ops::Range<u64>;

    /// The columns ranked (every item's).
    fn candidates(&self) -> std::ops::Range<u64>;

    /// The score of `candidate` for `subject`, from their columns' weights (one per weight
    /// row): higher ranks first.
    fn score(&self, subject: &[f32], candidate: &[f32]) -> f64;
}

/// A kind trained by model rotation (Harp's): the columns the workers trade in slices and
/// its SGD step, on the weights of a worker's block laid out key after key (a key's weight
/// rows side by side), so a row's step touches a few cache lines whatever the block's size.
pub trait Rotating {
    /// The columns traded among the workers in slices (matrix factorization: the items').
    fn rotated_columns(&self) -> std::ops::Range<u64>;

    /// One plain-SGD step (`angel_optim`'s `Sgd`, with `params`) on row `r` of `rows`
    /// (`row`: rows, r, and `g`, where its keys sit) on `weights` (slot `s`'s weight row `o`
    /// at `s * weight_rows + o`); every gradient is taken before the step. Returns the row's
    /// loss before the step.
    fn sgd_step(
        &self,
        row: (&SparseRows, usize, &Gathered),
        weights: &mut [f32],
        params: &angel_optim::OptimizerParams,
    ) -> f64;
}

/// A holdout metric beside the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Area under the ROC curve of `ps_predict` (binary classifiers).
    Auc,
    /// Share of rows whose `ps_predict` equals the label (classifiers of classes).
    Accuracy,
    /// Root mean squared error of `ps_predict` (kinds whose loss is half the squared error,
    /// so the training RMSE is `sqrt(2 train_loss)`).
    Rmse,
}

/// What a kind's rows are after the label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// Feature indices (a list of integers) and optional values: `label, indices [, values]`.
    Features,
    /// A user and an item (integers): `user, item, rating` (the label last).
    Pairs,
    /// A document: `doc, words [, counts]`, its id (any type, unused by training) and a list
    /// of word indices, with repeats or with their counts.
    Documents,
    /// A point: `id, point` (a list of numbers) or `id, indices, values` (sparse coordinates),
    /// the id unused by training.
    Points,
}

impl Inputs {
    /// Its columns, as errors name them.
    pub fn describe(self) -> &'static str {
        match self {
            Inputs::Features => "label, indices [, values]",
            Inputs::Pairs => "user, item, rating",
            Inputs::Documents => "doc, words [, counts]",
            Inputs::Points => "id, point or id, indices, values",
        }
    }
}

/// What the kinds' tests share.
#[cfg(test)]
pub(crate) mod checks {
    use super::Gradient;
    use crate::rows::{Gathered, SparseRows};

    /// Asserts that `kind`'s gradient of each row's loss (`margins`, `loss`, `backprop`) is
    /// the central difference of that loss, weight by weight (steps of 1e-2, within 1e-3
    /// relative): `weights` hold the gathered keys' weights row after row.
    pub(crate) fn gradient_is_that_of_the_loss(
        kind: &dyn Gradient,
        (rows, g): (&SparseRows, &Gathered),
        weights: &[f32],
    ) {
        let loss_at = |w: &[f32], r: usize| {
            let mut m = [0.0];
            kind.margins(rows, r, g, w, &mut m);
            kind.loss(rows.label(r), &m, &mut [0.0])
        };
        for r in 0..rows.len() {
            let (mut m, mut d) = ([0.0], [0.0]);
            kind.margins(rows, r, g, weights, &mut m);
            kind.loss(rows.label(r), &m, &mut d);
            let mut grads = vec![0.0; weights.len()];
            kind.backprop((rows, r, g), weights, &d, &mut grads);
            for (j, &analytic) in grads.iter().enumerate() {
                let h = 1e-2f32;
                let (mut up, mut down) = (weights.to_vec(), weights.to_vec());
                up[j] += h;
                down[j] -= h;
                let numeric = (loss_at(&up, r) - loss_at(&down, r)) / (2.0 * f64::from(h));
                assert!(
                    (analytic - numeric).abs() < 1e-3 * (1.0 + numeric.abs()),
                    "row {r}, weight {j}: {analytic} vs {numeric}"
                );
            }
        }
    }
}
