//! The model interface: [`ModelKind`], what every kind of model is and does, and the types
//! its methods name that name it back: a [`ModelSpec`] holds its [`Kind`], an opened
//! [`Model`] its spec, a statement's [`Plan`] its spec, and a kind's driver runs on an
//! [`Engine`] that answers the plan. Everything else sits above or below this file: the
//! kinds implement it (`kinds/`), the registry names them, and what a kind trained by
//! gradients is given is `gradient.rs`'s.
//!
//! - [`spec`]: reading and checking a spec's options, creating its matrix;
//! - [`opened`]: a model as a task uses it (pull, push, gradients, predictions);
//! - [`open`]: a model or spec read back from its matrix's training description (by its
//!   kind's name, through the registry);
//!
//! A model of dimension `dim` with `k` outputs (its kind's) is a matrix of `k * (1 + state
//! rows)` x `dim + 1`: per output, a row of weights (the last column the intercept) and then
//! the rows of the optimizer's state, kept beside the weights in every block so the servers
//! apply the optimizer in one push.

pub mod open;
pub mod opened;
pub mod spec;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use angel_client::{Compression, CompressionMode, MatrixSpec, OptimizerParams, PsClient};
use arrow::array::{ArrayRef, RecordBatch};

use crate::driver::engine::{Passed, TrainingQuery, Watch};
use crate::error::Result;
use crate::kept::Kept;
use crate::kinds::{Gradient, Inputs, Ranking, Rotating};
use crate::lbfgs::solver::Solver;
use crate::options::OptionValue;
use crate::rows::SparseRows;
use crate::saved::{ReadBack, Saved, SavedTable, TableSink};
use crate::sync::SyncSpec;
use crate::task_pass::{TaskContext, TaskPass};

/// Dimensions up to this are stored densely; larger ones (hashing) sparsely.
pub(crate) const MAX_DENSE_DIM: u64 = 1 << 26;

/// A matrix of `rows` rows of `dim` columns and the intercept's: dense up to
/// [`MAX_DENSE_DIM`] columns, sparse above (hashed features).
pub(crate) fn weights_matrix(name: &str, rows: u64, dim: u64) -> MatrixSpec {
    match dim < MAX_DENSE_DIM {
        true => MatrixSpec::dense(name, rows, dim + 1),
        false => MatrixSpec::sparse(name, rows, dim + 1),
    }
}

/// One kind of model, as training sees it: its options, its matrix's shape, its inputs, its
/// predictions, and how it trains ([`Trains`]). A model of `dim` features has
/// [`ModelKind::weight_rows`] rows of `dim + 1` columns (the last one the intercept's, or the
/// topic model's topic totals).
#[async_trait::async_trait]
pub trait ModelKind: Trains + KindBox + fmt::Debug + Send + Sync + 'static {
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

    /// Whether it trains without an optimizer (the topic model samples): model rotation then
    /// asks nothing of the optimizer or the update rule.
    fn optimizer_free(&self) -> bool {
        false
    }

    /// The matrix of model `name`: `rows` rows (its weight rows, each followed by the
    /// optimizer's state rows) of its `dim` columns and the intercept's; dense up to 2^26
    /// columns, sparse above (hashed features).
    fn matrix(&self, name: &str, rows: u64, dim: u64) -> Result<MatrixSpec> {
        Ok(weights_matrix(name, rows, dim))
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

    /// Most values the saved tables of one of its models of `dim` features hold (`LOAD MODEL`
    /// caps their files in proportion): its weight rows' by default.
    fn saved_values(&self, dim: u64) -> u64 {
        (self.weight_rows() as u64).saturating_mul(dim + 1)
    }

    /// The matrices its statements create beside model `model` (the boosted model's sketch,
    /// cuts, histograms and totals; the topic model's token topics), which a failed
    /// `CREATE MODEL` drops with the model so that running it again starts clean.
    fn companions(&self, model: &str) -> Vec<String> {
        let _ = model;
        Vec::new()
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

/// How a kind trains: its worker half (a task's pass), its driver half (the statement) and
/// its saved format. A kind trained by gradients gets all of it from `gradient.rs` by
/// implementing [`Gradient`]; another kind (the topic model, boosted trees, k-means)
/// implements it itself.
#[async_trait::async_trait]
pub trait Trains {
    /// How the kind learns by gradients, predicts and reports its holdout metrics; `None`:
    /// it does not (the topic model, trained by sampling).
    fn gradient(&self) -> Option<&dyn Gradient>;

    /// Opens a task's part of a training pass over `model` (of this kind): a kind trained by
    /// gradients opens mini-batch steps, a full-batch gradient or a rotation worker.
    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>>;

    /// Trains its statement's model on `engine` (passes of `ps_train` and the work on the
    /// servers between them) and answers the epoch table: a kind trained by
    /// gradients runs mini-batch epochs or a full-batch solver's iterations.
    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch>;

    /// The tables its saved models hold beside `model.json`, the parameters first
    /// (`weights.parquet` for a kind trained by gradients).
    fn saved_tables(&self) -> Vec<SavedTable>;

    /// Saves model `name` of `spec` (of this kind): writes the rows of each table of
    /// [`Trains::saved_tables`] to `sink` as it reads them from the servers, its features
    /// named by `features` (its counter's keys by index), and answers what `model.json`
    /// keeps beside them.
    async fn save(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
        sink: &mut dyn TableSink,
    ) -> Result<Saved>;

    /// Checks the saved model `read` back and loads it onto the service as model `name` of
    /// `spec` (of this kind), its counter rebuilt first; refuses, naming the file and row,
    /// what would load wrong.
    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()>;
}

/// What a boxed kind does whatever its type: clone itself (a [`crate::ModelSpec`] is cloned
/// with its kind), and be read back as its own type by its own folder (`Lda::of`).
pub trait KindBox {
    /// A boxed copy.
    fn clone_kind(&self) -> Box<dyn ModelKind>;

    /// Itself, for a downcast to its own type.
    fn as_any(&self) -> &dyn Any;
}

/// A model's kind with its options, as a [`crate::ModelSpec`] holds it.
#[derive(Debug, Clone)]
pub struct Kind(Box<dyn ModelKind>);

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

/// Everything that defines a model. Built from `CREATE MODEL` options, stored with the
/// model's matrix, read back by the SQL functions.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// Outputs, loss, prediction and metrics.
    pub kind: Kind,
    /// Number of features; indices run 0..dim and column `dim` is the intercept.
    pub dim: u64,
    /// The optimizer and its hyper-parameters (`optimizer`, rates, L1, L2), applied by the
    /// servers (and by the workers' local rounds under model averaging).
    pub optimizer: OptimizerParams,
    /// Rows per mini-batch: each record batch is cut into mini-batches of this many rows,
    /// each one pull and one push.
    pub batch_size: usize,
    /// The counter that gave the feature indices, if any (saved with the model).
    pub counter: Option<String>,
    /// How gradient pushes are encoded (`none` or `sketchml(...)`), so every process pushing
    /// to the model uses it.
    pub compression: Compression,
    /// Whether compression is used on every push or only while measured faster
    /// (`compression_mode`).
    pub compression_mode: CompressionMode,
    /// How its workers keep in step, and the update rule.
    pub sync: SyncSpec,
    /// Mini-batch steps, or a full-batch quasi-Newton method (`optimizer = 'lbfgs'`).
    pub solver: Solver,
}

/// A model on the service, as a task uses it: its spec and the process's client.
#[derive(Debug)]
pub struct Model {
    /// The model (and matrix) name.
    pub name: String,
    /// What the model is.
    pub spec: ModelSpec,
    /// The rows of weights, one per output, each followed by its optimizer state.
    rows: Vec<u64>,
    /// Rows per output: the weights and the optimizer's state.
    group: u64,
    client: Arc<PsClient>,
}

/// What a training statement asks for beyond the model itself.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The model's spec.
    pub spec: ModelSpec,
    /// Epochs (iterations, rounds, trees) to run, at most.
    pub epochs: usize,
    /// The table each epoch is scored on.
    pub holdout: Option<String>,
    /// Whether a figure that goes NaN or infinite fails the statement (`on_divergence =
    /// 'fail'`, the default) rather than training on (`'continue'`).
    pub fail_on_divergence: bool,
    /// Epochs an earlier run of the statement completed on the model the servers hold (a
    /// killed job run again): training goes on after them. Only drivers that report their
    /// epochs ([`Engine::epoch_done`]) are ever given more than 0.
    pub done_epochs: usize,
}

/// What the engine running a statement offers its kind's driver.
#[async_trait::async_trait]
pub trait Engine: Sync {
    /// The model the statement trains.
    fn model(&self) -> &str;

    /// The service, in the job's namespace.
    fn client(&self) -> &Arc<PsClient>;

    /// What the statement asks for.
    fn plan(&self) -> &Plan;

    /// The statement's training query.
    fn query(&self) -> &TrainingQuery;

    /// One pass of `ps_train` over the rows, on every column but the first `skip`, with
    /// `watch`'s bar moving as the tasks report their rows.
    async fn pass(&self, skip: usize, watch: Option<Watch<'_>>) -> Result<Passed>;

    /// The answer of `sql`, which may name the tables of the job and the model functions
    /// (`ps_predict`, `ps_distance`, ...).
    async fn answer(&self, sql: &str) -> Result<Vec<RecordBatch>>;

    /// After epoch `epoch` of a statement whose rows are held in memory: the record batches
    /// the epoch found in the key-list cache (0 otherwise).
    fn cached_after(&self, epoch: usize) -> u64;

    /// What the statement's workers keep from round to round in this process.
    fn kept(&self) -> &Kept;

    /// Epoch `epoch` is complete on the servers: recorded with the job's run, so the job
    /// killed after it resumes after it ([`Plan::done_epochs`]).
    async fn epoch_done(&self, epoch: usize) -> Result<()>;
}
