//! The kinds of model, one folder each, behind one interface, [`ModelKind`];
//! [`crate::registry`] lists them by the names `kind = '...'` selects them with.
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
//! 1. A type implementing [`ModelKind`] (its options, its matrix) and, for a kind trained by
//!    gradients, [`Gradient`] (its loss and the loss's derivative per output, its prediction,
//!    its metrics), and its tests: here, a folder `kinds/<name>/`.
//! 2. Its names in [`crate::registry`]: one line in its `KINDS`, or `register` for a
//!    program's own kind (`examples/src/poisson.rs`).
//!
//! `CREATE MODEL`, `ps_train`, `ps_predict`, `ps_predict_proba`, `ps_loss`, `SAVE MODEL` and
//! `LOAD MODEL` then work with it: they dispatch through the interface. A kind trained
//! otherwise overrides its worker half ([`ModelKind::open_pass`]), its driver half
//! ([`ModelKind::start`], [`ModelKind::drive`]) and its saved format
//! ([`ModelKind::saved_tables`], [`ModelKind::save`], [`ModelKind::load`]).

pub mod fm;
pub mod gbdt;
pub mod kmeans;
pub mod lda;
pub mod linear;
pub mod mf;
pub mod softmax;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};

use angel_client::{MatrixSpec, PsClient};
use arrow::array::{ArrayRef, RecordBatch};

use crate::driver::{self, Engine};
use crate::error::Result;
use crate::model::{Model, ModelSpec};
use crate::options::OptionValue;
use crate::rows::{Gathered, SparseRows};
use crate::saved::{self, ReadBack, Saved, SavedTable};
use crate::task_pass::{self, TaskContext, TaskPass};

/// Dimensions up to this are stored densely; larger ones (hashing) sparsely.
const MAX_DENSE_DIM: u64 = 1 << 26;

/// One kind of model, as training sees it: its options, its matrix's shape, its inputs, and
/// how it trains ([`Gradient`], or the topic model's sampling). A model of `dim` features has
/// [`ModelKind::weight_rows`] rows of `dim + 1` columns (the last one the intercept's, or the
/// topic model's topic totals).
#[async_trait::async_trait]
pub trait ModelKind: KindBox + fmt::Debug + Send + Sync + 'static {
    /// The name `kind = '...'` selects it by, stored with the model.
    fn name(&self) -> &'static str;

    /// The loss it minimises, as saved models name it (`log`, `squared`, ...).
    fn loss_name(&self) -> &'static str;

    /// Sets an option of this kind (`classes`, say); `Ok(false)` when `option` is not one of
    /// its own.
    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        let _ = option;
        Ok(false)
    }

    /// Its own options as `key = value` text, as its training description keeps them.
    fn options(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Refuses options that cannot work together (a softmax without `classes`).
    fn check(&self) -> Result<()> {
        Ok(())
    }

    /// Outputs per row: the margins its loss and prediction take (1; softmax: the classes).
    fn outputs(&self) -> usize {
        1
    }

    /// Rows of weights of its matrix, each followed by the optimizer's state rows (the
    /// outputs; matrix factorization: the factors and the bias).
    fn weight_rows(&self) -> usize {
        self.outputs()
    }

    /// Its own number of columns before the intercept's, when its options fix it (matrix
    /// factorization: users + items); `None`: the `dim` option.
    fn dim(&self) -> Option<u64> {
        None
    }

    /// What its rows are after the label, in the training query and the functions' arguments.
    fn inputs(&self) -> Inputs {
        Inputs::Features
    }

    /// Whether its options still want the mean label of the training rows (matrix
    /// factorization's global mean), which `CREATE MODEL` then sets as option `mean`.
    fn wants_label_mean(&self) -> bool {
        false
    }

    /// How the kind trains under model rotation (matrix factorization); `None`: it cannot
    /// rotate.
    fn rotating(&self) -> Option<&dyn Rotating> {
        None
    }

    /// Options whose value `CREATE MODEL` takes from a sealed counter's size, as
    /// (option, the option naming the counter, the counter): matrix factorization's `users`
    /// from `user_counter` when its ids come from `ps_index`.
    fn counted_options(&self) -> Vec<(&'static str, &'static str, String)> {
        Vec::new()
    }

    /// How the kind ranks candidates for a subject (matrix factorization: items for a user),
    /// for `ps_recommend`; `None`: it ranks nothing.
    fn ranking(&self) -> Option<&dyn Ranking> {
        None
    }

    /// Whether a full-batch quasi-Newton solver (`optimizer = 'lbfgs'`) can train it: its
    /// loss is smooth and convex in its weights.
    fn full_batch(&self) -> bool {
        false
    }

    /// The weight rows drawn at random when the model is created, with their standard
    /// deviation (matrix factorization's factors; zero weights would never move).
    fn random_rows(&self) -> Option<(std::ops::Range<usize>, f64)> {
        None
    }

    /// How the kind learns by gradients, predicts and reports its holdout metrics; `None`:
    /// it does not (the topic model, trained by sampling).
    fn gradient(&self) -> Option<&dyn Gradient>;

    /// Whether it trains without an optimizer (the topic model samples): model rotation then
    /// asks nothing of the optimizer or the update rule.
    fn optimizer_free(&self) -> bool {
        false
    }

    /// The matrix of model `name`: `rows` rows (its weight rows, each followed by the
    /// optimizer's state rows) of its `dim` columns and the intercept's; dense up to 2^26
    /// columns, sparse above (hashed features).
    fn matrix(&self, name: &str, rows: u64, dim: u64) -> Result<MatrixSpec> {
        Ok(match dim < MAX_DENSE_DIM {
            true => MatrixSpec::dense(name, rows, dim + 1),
            false => MatrixSpec::sparse(name, rows, dim + 1),
        })
    }

    /// Opens a task's part of a training pass over `model` (of this kind): by default as a
    /// kind trained by gradients, with the model's solver and parallelism.
    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
        task_pass::by_gradients(model, context)
    }

    /// How it reads the rows it scores when its gradient does not (k-means: points);
    /// `None`: as its gradient reads them.
    fn read_points(
        &self,
        function: &str,
        model: &Model,
        inputs: &[ArrayRef],
    ) -> Option<Result<SparseRows>> {
        let _ = (function, model, inputs);
        None
    }

    /// Writes its first values from the statement's training rows, after `CREATE MODEL`
    /// created its matrix and before the first pass (k-means's first centres); by default
    /// nothing.
    async fn start(&self, engine: &dyn Engine) -> Result<()> {
        let _ = engine;
        Ok(())
    }

    /// Trains its statement's model on `engine` (passes of `ps_train` and the work on the
    /// servers between them) and answers the epoch table; by default as a kind trained by
    /// gradients, with the model's solver.
    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch> {
        driver::by_gradients(engine).await
    }

    /// The tables its saved models hold beside `model.json`, the parameters first:
    /// `weights.parquet` by default.
    fn saved_tables(&self) -> Vec<SavedTable> {
        vec![saved::weights::table()]
    }

    /// The saved form of model `name` of `spec` (of this kind): a batch per table of
    /// [`ModelKind::saved_tables`], its features named by `features` (its counter's keys by
    /// index).
    async fn save(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
    ) -> Result<Saved> {
        saved::weights::save(client, name, spec, features).await
    }

    /// Checks the saved model `read` back and loads it onto the service as model `name` of
    /// `spec` (of this kind), its counter rebuilt first; refuses, naming the file and row,
    /// what would load wrong.
    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()> {
        saved::weights::load(client, name, spec, read).await
    }

    /// Every row's margins under `model` (one per output, row after row), which its scoring
    /// turns into predictions and losses: `w_o . x + b_o` by default, from one pruned pull.
    fn margins_of(&self, model: &Model, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        model.linear_margins(function, rows)
    }

    /// What `ps_predict` answers for every row of `rows` under `model`: its scoring's
    /// prediction of the row's margins by default.
    fn predictions(&self, model: &Model, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        model.per_row(function, rows, |scoring, _, m| scoring.predict(m))
    }

    /// Whether its epochs are iterations that stop at a tolerance (k-means), so that
    /// `epochs` is at most 100 unless said, as for the full-batch solvers.
    fn converges(&self) -> bool {
        false
    }

    /// Why `TRAIN MODEL` cannot train its models for more epochs, if it cannot (a boosted
    /// model grows all its trees in the statement that creates it).
    fn refuses_more_epochs(&self) -> Option<&'static str> {
        None
    }

    /// Whether its workers must get the same rows every round where a statement reads them
    /// anew (the topic model's workers read their tokens' topics back by their documents).
    fn keeps_rows_by_id(&self) -> bool {
        false
    }

    /// What its models answer instead of a label, for the error of a function that needs
    /// one (`ps_predict` of a topic model).
    fn answers_instead(&self) -> &'static str {
        " and predicts no label"
    }

    /// How a row's margins become its loss, prediction and metrics: a gradient kind's own, a
    /// boosted model's loss (its trees' leaves add up to the margin); `None` for the topic
    /// model.
    fn scoring(&self) -> Option<&dyn Gradient> {
        self.gradient()
    }
}

/// A kind trained by gradients: how it reads its rows, turns weights into a row's margins
/// and its loss into gradients, and what it predicts. A training step pulls the weights of
/// the keys a mini-batch uses, asks the kind for each row's loss and its derivative with
/// respect to each margin, and pushes the gradients that follow to the servers' optimizer.
pub trait Gradient {
    /// Reads the rows of a call: the `label` column (training, loss) and the `inputs`
    /// columns, as [`ModelKind::inputs`] says.
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

/// What a boxed kind does whatever its type: clone itself (a [`crate::ModelSpec`] is cloned
/// with its kind), and be read back as its own type by its own folder (`Lda::of`).
pub trait KindBox {
    /// A boxed copy.
    fn clone_kind(&self) -> Box<dyn ModelKind>;

    /// Itself, for a downcast to its own type.
    fn as_any(&self) -> &dyn Any;
}

impl<T: ModelKind + Clone> KindBox for T {
    fn clone_kind(&self) -> Box<dyn ModelKind> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Clone for Box<dyn ModelKind> {
    fn clone(&self) -> Self {
        self.clone_kind()
    }
}

/// A model's kind with its options, as a [`crate::ModelSpec`] holds it.
#[derive(Debug, Clone)]
pub struct Kind(Box<dyn ModelKind>);

impl Deref for Kind {
    type Target = dyn ModelKind;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}

impl DerefMut for Kind {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_mut()
    }
}

impl Kind {
    /// `kind`, with the options it holds.
    pub fn of(kind: impl ModelKind + Clone) -> Kind {
        Kind(Box::new(kind))
    }

    /// The boxed kind `kind`.
    pub fn from_box(kind: Box<dyn ModelKind>) -> Kind {
        Kind(kind)
    }

    /// Its options as kind `T`, when it is one: for `T`'s own folder only (every other
    /// place asks the interface).
    pub fn own<T: ModelKind>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name() && self.options() == other.options()
    }
}

/// Refuses model `model` for `function`, which takes `wanted` only ("a topic model").
pub fn refuse<T>(model: &crate::Model, function: &str, wanted: &str) -> Result<T> {
    crate::error::input_err(format!(
        "{function}: model '{}' is a {} model, not {wanted}",
        model.name,
        model.spec.kind.name()
    ))
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
