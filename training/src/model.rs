//! [`ModelSpec`]: what a model is (kind, optimizer, hyper-parameters, dimension, sync), stored
//! with its matrix on the PS as the wire's typed [`Training`] description, which the servers
//! (optimizer, update rule) and the master's clock table (sync) read too, so every task, in
//! any process, reads the same spec; and [`Model`], a model opened on the service by a task:
//! pull, push, gradients, predictions.
//!
//! A model of dimension `dim` with `k` outputs (its kind's) is a matrix of `k * (1 + state
//! rows)` x `dim + 1`: per output, a row of weights (the last column the intercept) and then
//! the rows of the optimizer's state, kept beside the weights in every block so the servers
//! apply the optimizer in one push.

use std::ops::Range;
use std::sync::Arc;

use angel_client::matrix::Matrix;
use angel_client::runtime::{Started, block_on, start};
use angel_client::{
    Ack, Compression, CompressionMode, MatrixMeta, MatrixSpec, OptimizerParams, PsClient,
    PushOptions, TaskChange, Training, WorkerClock, optimizer_params,
};
use angel_optim::{Optimizer, builtin, rule};
use arrow::array::ArrayRef;

use crate::error::{Error, Result, input_err, option_err};
use crate::kinds::{Gradient, Kind};
use crate::lbfgs::history;
use crate::lbfgs::solver::{Method, Solver};
use crate::options::OptionValue;
use crate::registry;
use crate::rows::{Gathered, MiniBatches, SparseRows};
use crate::sync::{self, StepBudget, SyncSpec};

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

impl ModelSpec {
    /// A spec with the defaults for `kind` over `dim` features: Adam, rate 0.01, mini-batches
    /// of 256 rows, no regularisation.
    pub fn new(kind: Kind, dim: u64) -> Self {
        ModelSpec {
            kind,
            dim,
            optimizer: optimizer_params("adam", 0.01),
            batch_size: 256,
            counter: None,
            compression: Compression::None,
            compression_mode: CompressionMode::Auto,
            sync: SyncSpec::default(),
            solver: Solver::default(),
        }
    }

    /// Sets an option by name (the `CREATE MODEL ... OPTIONS` keys), refusing a value outside
    /// the option's range with an error naming the option, the value and what is allowed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let option = OptionValue { key, value };
        let key = &key.to_ascii_lowercase();
        if self.sync.set(key, value)? {
            return Ok(());
        }
        if key == "kind" {
            if !value.trim().eq_ignore_ascii_case(self.kind.name()) {
                self.kind = registry::by_name(value)?;
            }
            return Ok(());
        }
        // The kind's own options first: the topic model's alpha and beta are its priors,
        // k-means's tolerance is not the full-batch solvers'.
        if self.kind.set(&option)? {
            if let Some(dim) = self.kind.dim() {
                self.dim = dim;
            }
            return Ok(());
        }
        if self.solver.set(&option)? {
            return Ok(());
        }
        let u = &mut self.optimizer;
        match key.as_str() {
            "dim" => self.dim = option.whole(1, MAX_DIM)?,
            "optimizer" => {
                let name = value.trim().to_ascii_lowercase();
                self.solver.method = Method::named(&name);
                // What the servers would apply to a push to a full-batch model: plain steps.
                u.name = match self.solver.method {
                    Some(_) => "sgd".to_string(),
                    None => name,
                };
            }
            "learning_rate" | "lr" | "alpha" => {
                u.learning_rate = option.number(|x| x > 0.0, "a finite number above 0")?
            }
            "l1" => u.l1 = option.number(|x| x >= 0.0, "a finite number, 0 or more")?,
            "l2" => u.l2 = option.number(|x| x >= 0.0, "a finite number, 0 or more")?,
            "beta1" => u.beta1 = option.number(|x| (0.0..1.0).contains(&x), "in [0, 1)")?,
            "beta2" => u.beta2 = option.number(|x| (0.0..1.0).contains(&x), "in [0, 1)")?,
            "epsilon" => u.epsilon = option.number(|x| x > 0.0, "a finite number above 0")?,
            "beta" => u.beta = option.number(|x| x >= 0.0, "a finite number, 0 or more")?,
            "batch_size" => self.batch_size = option.whole(1, MAX_BATCH as u64)? as usize,
            "counter" => self.counter = Some(value.to_string()).filter(|c| !c.is_empty()),
            "compression" => {
                self.compression = value
                    .parse()
                    .map_err(|e| Error::Option(format!("model option {e}")))?
            }
            "compression_mode" => {
                self.compression_mode = value
                    .parse()
                    .map_err(|e| Error::Option(format!("model option {e}")))?
            }
            _ => return option_err(format!("unknown model option '{key}'")),
        }
        if let Some(dim) = self.kind.dim() {
            self.dim = dim;
        }
        Ok(())
    }

    /// The model's training description, stored with its matrix.
    pub fn to_training(&self) -> Training {
        Training {
            kind: self.kind.name().to_string(),
            kind_options: (self.kind.options().into_iter())
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            dim: self.dim,
            batch_size: self.batch_size as u64,
            counter: self.counter.clone().unwrap_or_default(),
            // The servers apply it to gradient pushes; a kind without gradients has none.
            optimizer: self.kind.gradient().map(|_| self.optimizer.clone()),
            sync: Some(self.sync.to_proto()),
            update: self.sync.rule as i32,
            local_steps: self.sync.local_steps,
            compression: self.compression.to_string(),
            compression_mode: self.compression_mode.to_string(),
            solver: self.solver.to_proto(),
        }
    }

    /// Reads a spec back from model `model`'s training description, checking every option as
    /// `CREATE MODEL` does.
    pub fn from_training(model: &str, training: &Training) -> Result<Self> {
        let spec = match training.kind.is_empty() {
            true => None,
            false => Some(Self::from_options(model, &options(training))?),
        };
        match spec {
            Some(spec) if spec.kind.gradient().is_none() || training.optimizer.is_some() => {
                Ok(spec)
            }
            _ => input_err(format!(
                "matrix '{model}' is not a model (its training description names no kind or \
                 no optimizer)"
            )),
        }
    }

    /// The spec of model `name`, from its matrix's training description.
    pub fn of_matrix(name: &str, meta: &MatrixMeta) -> Result<Self> {
        match &meta.training {
            Some(training) => Self::from_training(name, training),
            None => input_err(format!(
                "matrix '{name}' is not a model (it has no training description)"
            )),
        }
    }

    /// Every option as `key = value` text, as `CREATE MODEL` takes them: what a saved model
    /// keeps.
    pub fn to_options(&self) -> Vec<(String, String)> {
        options(&self.to_training())
    }

    /// Reads a spec from `key = value` options (the model's kind among them).
    pub fn from_options(model: &str, options: &[(String, String)]) -> Result<Self> {
        let Some((_, kind)) = options.iter().find(|(k, _)| k == "kind") else {
            return input_err(format!("model '{model}' has no 'kind' option"));
        };
        let mut spec = ModelSpec::new(registry::by_name(kind)?, 0);
        for (k, v) in options {
            spec.set(k, v)?;
        }
        Ok(spec)
    }

    /// Creates the model's matrix on the service, with the rows of state the servers report
    /// for its optimizer (built-in or registered by a user on the servers).
    pub async fn create(&self, client: &PsClient, name: &str) -> Result<Arc<Matrix>> {
        // A kind without gradients (the topic model's counts) keeps no optimizer state; a
        // full-batch model keeps its history.
        let state_rows = match (self.kind.gradient(), self.solver.method) {
            (Some(_), Some(_)) => history::state_rows(self.solver.memory) as u32,
            (Some(_), None) => client.optimizer(&self.optimizer.name).await?.state_rows,
            (None, _) => 0,
        };
        let spec = self.matrix(name, state_rows)?;
        Ok(client.create_matrix(spec).await?)
    }

    /// Draws the weight rows its kind starts at random (matrix factorization's factors) on
    /// the servers, from `seed`; the others start at zero.
    pub async fn randomize(&self, client: &PsClient, name: &str, seed: u64) -> Result<()> {
        let Some((rows, std_dev)) = self.kind.random_rows() else {
            return Ok(());
        };
        let group = client.matrix(name).await?.meta.rows / self.kind.weight_rows() as u64;
        for row in rows {
            let at = row as u64 * group;
            // The servers draw each row from its own stream of the seed.
            let args = [0.0, std_dev, seed as f64];
            client.psf("random_normal", &[(name, at)], &args).await?;
        }
        Ok(())
    }

    /// The optimizer workers apply to their local model under model averaging: a built-in
    /// one (a user's optimizer runs only on the servers where it is registered).
    pub fn local_optimizer(&self) -> Result<&'static dyn Optimizer> {
        let name = &self.optimizer.name;
        builtin::by_name(name).map_or_else(
            || {
                option_err(format!(
                    "model option update = 'average' trains local rounds with the model's \
                     optimizer on the workers, and optimizer '{name}' runs only on the servers \
                     (the workers have sgd, adagrad, adam and ftrl)"
                ))
            },
            Ok,
        )
    }

    /// Refuses what model rotation cannot train: a kind with nothing to rotate, another
    /// optimizer than the workers' plain SGD, another update rule.
    fn check_rotation(&self) -> Result<()> {
        let kind = self.kind.name();
        if self.kind.optimizer_free() {
            return Ok(());
        }
        if self.kind.rotating().is_none() {
            return option_err(format!(
                "model option parallelism = 'rotation' is for kinds with a part to rotate \
                 (mf, lda); a {kind} model trains with parallelism = 'data'"
            ));
        }
        if self.optimizer.name != "sgd" || self.sync.rule != angel_client::UpdateRule::Sgd {
            return option_err(format!(
                "model option parallelism = 'rotation' trains with plain SGD on the workers \
                 (Harp's): it needs optimizer = 'sgd' and update = 'sgd', not optimizer = \
                 '{}', update = '{}'",
                self.optimizer.name,
                rule::name(self.sync.rule)
            ));
        }
        Ok(())
    }

    /// Refuses what a full-batch solver cannot train: a kind whose loss is not smooth and
    /// convex in its weights, mini-batch options, an L1 penalty without OWL-QN.
    fn check_solver(&self) -> Result<()> {
        self.solver.check(&self.optimizer.name)?;
        let Some(method) = self.solver.method else {
            return Ok(());
        };
        let (kind, name) = (self.kind.name(), method.name());
        if !self.kind.full_batch() {
            return option_err(format!(
                "optimizer = '{name}' trains logistic, linear and softmax models (a smooth \
                 convex loss), not a {kind} model"
            ));
        }
        if self.sync.rotation || rule::of(self.sync.rule).averages() {
            return option_err(format!(
                "optimizer = '{name}' computes full gradients and moves the weights on the \
                 servers: it takes no parallelism = 'rotation' or update = 'average'"
            ));
        }
        if self.optimizer.l1 > 0.0 && method == Method::Lbfgs {
            return option_err(
                "an l1 penalty is not smooth, which L-BFGS needs: use optimizer = 'owlqn'",
            );
        }
        Ok(())
    }

    /// The matrix holding the model: per output, weights and intercept in one row, then
    /// `state_rows` rows of optimizer state; every row together in each block.
    fn matrix(&self, name: &str, state_rows: u32) -> Result<MatrixSpec> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return option_err(format!(
                "model '{name}': dim must be from 1 to {MAX_DIM}, got {}",
                self.dim
            ));
        }
        self.kind.check()?;
        self.check_solver()?;
        if rule::of(self.sync.rule).averages() {
            self.local_optimizer()?;
        }
        match (self.sync.rotation, self.sync.step_budget) {
            (true, _) => self.check_rotation()?,
            (false, StepBudget::None) => {}
            (false, _) => {
                return option_err(
                    "model option step_ms is model rotation's time control: it needs \
                     parallelism = 'rotation'",
                );
            }
        }
        let rows = self.kind.weight_rows() as u64 * (1 + u64::from(state_rows));
        let spec = self.kind.matrix(name, rows, self.dim)?;
        Ok(spec.block_shape(rows, 0).training(self.to_training()))
    }

    /// The rows of a batch (the `label` and `inputs` arrays of `function`'s arguments, as
    /// the kind reads them), checked against model `name` and cut into its mini-batches.
    pub fn mini_batches(
        &self,
        function: &str,
        name: &str,
        (label, inputs): (&ArrayRef, &[ArrayRef]),
    ) -> Result<MiniBatches> {
        let gradient = self.gradient(function, name)?;
        let rows = gradient.read_rows(function, Some(label), inputs)?;
        rows.check(function, name, self.dim)?;
        rows.check_labels(function, name, gradient)?;
        // A full-batch model's gradient takes every row: one pull per batch of rows.
        let size = match self.solver.method {
            Some(_) => rows.len(),
            None => self.batch_size,
        };
        Ok(rows.into_mini_batches(size, self.bias_key()))
    }

    /// How the model's kind learns by gradients and predicts (a boosted model: its loss and
    /// prediction from a row's margin), for `function` on model `name`; an error naming both
    /// for a kind that does not (the topic model).
    pub fn gradient(&self, function: &str, name: &str) -> Result<&dyn Gradient> {
        match self.kind.scoring() {
            Some(gradient) => Ok(gradient),
            None => input_err(format!(
                "{function}: model '{name}' is a {} model, which is not trained by gradients{}",
                self.kind.name(),
                self.kind.answers_instead()
            )),
        }
    }

    /// The column of the intercept.
    pub fn bias_key(&self) -> u64 {
        self.dim
    }
}

/// The options of training description `t` as `key = value` text, as `CREATE MODEL` takes
/// them, the kind first.
fn options(t: &Training) -> Vec<(String, String)> {
    let mut text = vec![
        ("kind", t.kind.clone()),
        ("dim", t.dim.to_string()),
        ("batch_size", t.batch_size.to_string()),
    ];
    if !t.counter.is_empty() {
        text.push(("counter", t.counter.clone()));
    }
    if let Some(u) = &t.optimizer {
        text.extend([
            ("optimizer", u.name.clone()),
            ("learning_rate", u.learning_rate.to_string()),
            ("l1", u.l1.to_string()),
            ("l2", u.l2.to_string()),
            ("beta1", u.beta1.to_string()),
            ("beta2", u.beta2.to_string()),
            ("epsilon", u.epsilon.to_string()),
            ("beta", u.beta.to_string()),
        ]);
    }
    for (key, value) in [
        ("compression", &t.compression),
        ("compression_mode", &t.compression_mode),
    ] {
        if !value.is_empty() {
            text.push((key, value.clone()));
        }
    }
    let sync = t.sync.unwrap_or_default();
    text.extend(sync::options(&sync, t.update(), t.local_steps));
    // After the optimizer's: `optimizer = 'lbfgs'` replaces the plain SGD stored.
    if let Some(solver) = &t.solver {
        text.extend(Solver::options(solver));
    }
    let mut text: Vec<(String, String)> =
        text.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let mut own: Vec<_> = t.kind_options.clone().into_iter().collect();
    own.sort();
    // A kind's option of a generic option's name (the topic model's beta) is the kind's.
    text.retain(|(k, _)| !own.iter().any(|(o, _)| o == k));
    text.extend(own);
    text
}

/// The largest dimension: column `dim` (the intercept) must fit a 63-bit key.
const MAX_DIM: u64 = (1 << 63) - 2;
/// The largest mini-batch, in rows.
const MAX_BATCH: usize = 1 << 24;

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

impl Model {
    /// Opens model `name` with `client` (of the service, in the job's namespace), reading its
    /// spec from the matrix. The process's map is refreshed first: a model replaced (`CREATE
    /// OR REPLACE MODEL`) since this process last used it is a new matrix, which a cached map
    /// would not know.
    pub fn open(client: Arc<PsClient>, name: &str) -> Result<Self> {
        block_on(client.refresh())?;
        let matrix = block_on(client.matrix(name))?;
        let spec = ModelSpec::of_matrix(name, &matrix.meta)?;
        let outputs = spec.kind.weight_rows() as u64;
        let group = matrix.meta.rows / outputs.max(1);
        if group == 0 || group * outputs != matrix.meta.rows {
            return input_err(format!(
                "matrix '{name}' has {} rows, not a group of rows per weight row of its \
                 {outputs} weight rows",
                matrix.meta.rows
            ));
        }
        if rule::of(spec.sync.rule).averages() {
            let local = spec.local_optimizer()?;
            if local.state_rows() as u64 + 1 != group {
                return input_err(format!(
                    "model '{name}' keeps {} state rows per output, but the workers' optimizer \
                     '{}' keeps {}: the servers run another optimizer of that name, which model \
                     averaging cannot train with",
                    group - 1,
                    local.name(),
                    local.state_rows()
                ));
            }
        }
        Ok(Model {
            name: name.to_string(),
            rows: (0..outputs).map(|o| o * group).collect(),
            group,
            spec,
            client,
        })
    }

    /// Current weights of `keys` (a pruned pull), output after output.
    pub fn weights(&self, keys: &[u64]) -> Result<Vec<f32>> {
        Ok(self.pull(keys, None)?.0)
    }

    /// [`Model::weights`] pulled by a training worker at its clock (`step`), with the
    /// versions of the partitions read (a DynSGD push states them back).
    pub fn pull(&self, keys: &[u64], step: Option<WorkerClock>) -> Result<(Vec<f32>, Vec<Ack>)> {
        Ok(block_on(
            self.client.pull_at(&self.name, &self.rows, keys, step),
        )?)
    }

    /// Starts [`Model::pull`] of `keys` and returns at once: the pull of a training task's
    /// next mini-batch, in flight while it computes the current one.
    pub fn pull_ahead(&self, keys: Vec<u64>, step: WorkerClock) -> Started<(Vec<f32>, Vec<Ack>)> {
        let (client, name, rows) = (self.client.clone(), self.name.clone(), self.rows.clone());
        start(async move { client.pull_at(&name, &rows, &keys, Some(step)).await })
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
    /// (`step`), row after row: what model averaging's local rounds start from.
    pub fn pull_all(&self, keys: &[u64], step: Option<WorkerClock>) -> Result<Vec<f32>> {
        let rows = self.all_rows();
        let pulled = block_on(self.client.pull_at(&self.name, &rows, keys, step))?;
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
        rows.check_labels(function, &self.name, kind)?;
        let mut d = vec![0.0; self.spec.kind.outputs()];
        self.per_row(function, rows, |kind, r, m| {
            kind.loss(rows.label(r), m, &mut d)
        })
    }

    /// The process's client of the model's service.
    pub fn client(&self) -> &Arc<PsClient> {
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rotation needs a kind with a part to rotate and plain SGD; time control needs rotation.
    #[test]
    fn what_rotation_cannot_train_is_refused_naming_the_option() {
        let refusal = |kind: &str, options: &[(&str, &str)]| {
            let mut spec = ModelSpec::new(registry::by_name(kind).unwrap(), 5);
            if kind == "mf" {
                spec.set("users", "3").unwrap();
                spec.set("items", "4").unwrap();
            }
            for (k, v) in options {
                spec.set(k, v).unwrap();
            }
            spec.matrix("m", 0).err().map(|e| e.to_string())
        };
        let rotate = ("parallelism", "rotation");
        let sgd = ("optimizer", "sgd");
        assert_eq!(refusal("mf", &[rotate, sgd, ("step_ms", "auto")]), None);
        let err = refusal("logistic", &[rotate, sgd]).unwrap();
        assert!(err.contains("a part to rotate"), "{err}");
        let err = refusal("mf", &[rotate, ("optimizer", "adam")]).unwrap();
        assert!(err.contains("optimizer = 'sgd'"), "{err}");
        let err = refusal("mf", &[sgd, ("step_ms", "20")]).unwrap();
        assert!(
            err.contains("step_ms") && err.contains("parallelism"),
            "{err}"
        );
        let mut spec = ModelSpec::new(registry::by_name("mf").unwrap(), 0);
        let err = spec.set("step_ms", "soon").unwrap_err().to_string();
        assert!(err.contains("'auto', or a whole number"), "{err}");
    }

    #[test]
    fn a_spec_survives_the_trip_through_its_training_description_and_options() {
        let mut spec = ModelSpec::new(registry::by_name("svm").unwrap(), 123);
        spec.set("optimizer", "FTRL").unwrap();
        spec.set("l1", "0.5").unwrap();
        spec.set("counter", "feats").unwrap();
        spec.set("compression", "sketchml").unwrap();
        spec.set("compression_mode", "always").unwrap();
        let back = ModelSpec::from_training("m", &spec.to_training()).unwrap();
        assert_eq!(back, spec);
        assert_eq!(
            ModelSpec::from_options("m", &spec.to_options()).unwrap(),
            spec
        );
        assert_eq!(back.matrix("m", 2).unwrap().rows, 3);
        let mut softmax = ModelSpec::new(registry::by_name("softmax").unwrap(), 10);
        assert!(softmax.matrix("s", 2).is_err(), "classes is required");
        softmax.set("classes", "4").unwrap();
        let back = ModelSpec::from_training("s", &softmax.to_training()).unwrap();
        assert_eq!(back.kind.outputs(), 4);
        assert_eq!(back.matrix("s", 2).unwrap().rows, 12);
        for (key, value, allowed) in [
            ("learning_rate", "fast", "above 0"),
            ("learning_rate", "NaN", "above 0"),
            ("lr", "0", "above 0"),
            ("l2", "-1", "0 or more"),
            ("batch_size", "0", "from 1 to"),
            ("batch_size", "2.5", "whole number"),
            ("dim", "0", "from 1 to"),
            ("dim", "9223372036854775807", "from 1 to"),
            ("beta1", "1", "[0, 1)"),
        ] {
            let err = spec.set(key, value).unwrap_err().to_string();
            let named = format!("{key} = '{value}' is not allowed");
            assert!(err.contains(&named) && err.contains(allowed), "{err}");
        }
        assert_eq!(
            spec,
            ModelSpec::from_training("m", &spec.to_training()).unwrap()
        );
        spec.set("update", "average").unwrap();
        spec.set("optimizer", "mine").unwrap();
        let err = spec.matrix("m", 0).unwrap_err().to_string();
        assert!(
            err.contains("optimizer 'mine' runs only on the servers"),
            "{err}"
        );
        assert!(spec.set("momentum", "1").is_err());
        let err = spec
            .set("compression_mode", "never")
            .unwrap_err()
            .to_string();
        assert!(err.contains("compression_mode 'never'"), "{err}");
    }
}
