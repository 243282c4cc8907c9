//! k-means (`kind = 'kmeans'`): `k` centres on the PS, trained by Lloyd's algorithm (every
//! row assigned to its nearest centre, the centres moved to their rows' means, one pass of the
//! workers per iteration) or by mini-batch k-means (Sculley: each mini-batch moves the centres
//! it touches towards its rows, by steps that shrink as a centre's rows add up).
//!
//! Rows are `id, point` (a list of numbers, coordinate `i` at position `i`) or `id, idx, val`
//! (sparse coordinates), the id unused by training, as a topic model's documents have one.
//! The model's matrix has `2k` rows of `dim + 1` columns in the same blocks: rows `0..k` the
//! centres (column `dim`: the rows nearest each at the last iteration, or every row a
//! mini-batch gave it), rows `k..2k` the sums the workers push during a Lloyd pass (column
//! `dim`: their count) or the centres before a mini-batch pass.
//!
//! - [`centres`]: the centres a worker pulled, each row's nearest, and Lloyd's sums.
//! - [`minibatch`]: Sculley's step of mini-batch k-means.
//! - [`points`]: rows read from `point` or `idx, val` columns.
//! - [`predict`]: each row's nearest centre and distance (`ps_predict`, `ps_distance`).
//! - [`seeding`]: the first centres (rows drawn at random, a table, k-means++, k-means||'s
//!   reduction).
//! - [`task`]: a worker's pass in a statement (`ps_train`).
//! - [`init`]: the statement's first centres, with [`parallel`] (k-means||) and
//!   [`sampling`] (points drawn and read by SQL, centres written).
//! - [`driver`]: the statement's iterations, Lloyd's or mini-batch, on the servers.

pub mod centres;
pub mod driver;
pub mod init;
pub mod minibatch;
pub mod parallel;
pub mod points;
pub mod predict;
pub mod sampling;
pub mod seeding;
pub mod task;

use std::collections::HashMap;

use angel_client::{MatrixSpec, PsClient};
use arrow::array::{ArrayRef, RecordBatch};

use crate::error::{Result, option_err};
use crate::kinds::{Gradient, Inputs};
use crate::model::{Engine, Model, ModelKind, ModelSpec, Trains, weights_matrix};
use crate::options::OptionValue;
use crate::rows::SparseRows;
use crate::saved::{ReadBack, Saved, SavedTable, TableSink, weights};
use crate::task_pass::{TaskContext, TaskPass};

/// Most centres a model may have.
pub const MAX_CENTRES: u64 = 1 << 16;

/// Most values a model's centres may hold (k x dim): 2^27, 1 GiB of doubles. A worker keeps
/// its centres and their sums dense (a mean of points has every feature any of them has), so
/// their size is the options' alone and is refused before anything is allocated.
pub const MAX_CENTRE_VALUES: u64 = 1 << 27;

/// The rows' squared distance per coordinate under which the centres' summed squared move
/// in an iteration ends training (option `tolerance`), as scikit-learn's `tol`.
pub const DEFAULT_TOLERANCE: f64 = 1e-4;

/// How the centres are trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Lloyd's: a pass assigns every row, then each centre moves to its rows' mean.
    Lloyd,
    /// Sculley's mini-batch k-means: every `batch_size` rows move the centres at once.
    MiniBatch,
}

/// How the first centres are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// `k` rows drawn uniformly (by a seeded hash of each row's content).
    Random,
    /// k-means++ (Arthur and Vassilvitskii) over a uniform sample of the rows.
    PlusPlus,
    /// k-means|| (Bahmani et al.): rounds over every row, each drawing about `2k` candidates
    /// by their squared distance to those drawn before, reduced to `k` at the end.
    Parallel,
}

/// See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct KMeans {
    /// Number of centres (option `k`); 0 until set.
    pub k: usize,
    /// How the first centres are chosen (option `init`), unless `init_table` gives them.
    pub init: Init,
    /// A table of `k` rows, `id, point` or `id, idx, val`, holding the first centres (option
    /// `init = 'table:NAME'`).
    pub init_table: Option<String>,
    /// Seed of the draws (option `seed`), so a job picks the same centres at every run.
    pub seed: u64,
    /// k-means||'s rounds (option `init_steps`, Spark MLlib's `initSteps`).
    pub init_steps: usize,
    /// Lloyd's iterations or mini-batches (option `algorithm`).
    pub algorithm: Algorithm,
    /// Training ends when an iteration moves the centres by a summed square of at most this
    /// times the rows' mean squared distance per coordinate (option `tolerance`; 0: only when
    /// they stop moving).
    pub tolerance: f64,
}

impl Default for KMeans {
    /// k-means++, seed 1, Lloyd's iterations to a tolerance of 1e-4.
    fn default() -> Self {
        KMeans {
            k: 0,
            init: Init::PlusPlus,
            init_table: None,
            seed: 1,
            init_steps: 2,
            algorithm: Algorithm::Lloyd,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

#[async_trait::async_trait]
impl ModelKind for KMeans {
    fn name(&self) -> &'static str {
        "kmeans"
    }

    fn loss_name(&self) -> &'static str {
        "squared distance"
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        match option.key.to_ascii_lowercase().as_str() {
            "k" => self.k = option.whole(2, MAX_CENTRES)? as usize,
            "seed" => self.seed = option.whole(0, u64::MAX)?,
            "init_steps" => self.init_steps = option.whole(1, 20)? as usize,
            "algorithm" => {
                self.algorithm = match option.one_of(&["lloyd", "minibatch"])? {
                    "minibatch" => Algorithm::MiniBatch,
                    _ => Algorithm::Lloyd,
                }
            }
            "tolerance" => {
                self.tolerance = option.number(|x| (0.0..1.0).contains(&x), "in [0, 1)")?
            }
            "init" => match option.value.trim().strip_prefix("table:") {
                Some(table) if !table.trim().is_empty() => {
                    self.init_table = Some(table.trim().to_string())
                }
                _ => {
                    self.init_table = None;
                    let choices = ["k-means++", "k-means||", "random", "table:NAME"];
                    self.init = match option.one_of(&choices)? {
                        "random" => Init::Random,
                        "k-means++" => Init::PlusPlus,
                        "k-means||" => Init::Parallel,
                        _ => return option.refuse("k-means++, k-means||, random or table:NAME"),
                    };
                }
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        let init = match (&self.init_table, self.init) {
            (Some(table), _) => format!("table:{table}"),
            (None, Init::Random) => "random".into(),
            (None, Init::PlusPlus) => "k-means++".into(),
            (None, Init::Parallel) => "k-means||".into(),
        };
        let algorithm = match self.algorithm {
            Algorithm::Lloyd => "lloyd",
            Algorithm::MiniBatch => "minibatch",
        };
        vec![
            ("k", self.k.to_string()),
            ("init", init),
            ("seed", self.seed.to_string()),
            ("init_steps", self.init_steps.to_string()),
            ("algorithm", algorithm.into()),
            ("tolerance", self.tolerance.to_string()),
        ]
    }

    fn check(&self) -> Result<()> {
        match self.k {
            0 => option_err(
                "a kmeans model needs the option k (the number of centres, from 2 to 65536)",
            ),
            _ => Ok(()),
        }
    }

    fn weight_rows(&self) -> usize {
        2 * self.k
    }

    /// The default matrix, refused when its centres are past [`MAX_CENTRE_VALUES`].
    fn matrix(&self, name: &str, rows: u64, dim: u64) -> Result<MatrixSpec> {
        let values = (self.k as u64).saturating_mul(dim);
        if values > MAX_CENTRE_VALUES {
            return option_err(format!(
                "model '{name}': a kmeans model's {} centres of dim = {dim} hold {values} \
                 values, past the {MAX_CENTRE_VALUES} (1 GiB of doubles) a worker keeps dense; \
                 hash the features into a smaller dim or use fewer centres",
                self.k
            ));
        }
        Ok(weights_matrix(name, rows, dim))
    }

    fn inputs(&self) -> Inputs {
        Inputs::Points
    }

    fn read_points(
        &self,
        function: &str,
        model: &Model,
        inputs: &[ArrayRef],
    ) -> Option<Result<SparseRows>> {
        Some(points::read(function, &model.name, model.spec.dim, inputs))
    }

    /// Each row's nearest centre.
    fn predictions(&self, model: &Model, function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        let nearest = predict::nearest(model, function, rows)?;
        Ok(nearest.into_iter().map(|(c, _)| c as f64).collect())
    }

    fn converges(&self) -> bool {
        true
    }

    fn answers_instead(&self) -> &'static str {
        "; ps_predict gives a row's nearest centre, ps_distance its distance"
    }

    async fn start(&self, engine: &dyn Engine) -> Result<()> {
        init::first_centres(engine, self).await
    }
}

#[async_trait::async_trait]
impl Trains for KMeans {
    fn gradient(&self) -> Option<&dyn Gradient> {
        None
    }

    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
        Ok(Box::new(task::CentresTask::new(
            model,
            self,
            context.function,
        )))
    }

    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch> {
        driver::train(engine, self).await
    }

    fn saved_tables(&self) -> Vec<SavedTable> {
        vec![weights::table()]
    }

    async fn save(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
        sink: &mut dyn TableSink,
    ) -> Result<Saved> {
        weights::save(client, name, spec, features, sink).await
    }

    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()> {
        weights::load(client, name, spec, read).await
    }
}

impl KMeans {
    /// The k-means options of `model`, which `function` uses; an error naming both when the
    /// model is of another kind.
    pub fn of(model: &Model, function: &str) -> Result<KMeans> {
        let wanted = "a k-means model (kind = 'kmeans')";
        (model.spec.kind.own().cloned()).map_or_else(|| model.refuse(function, wanted), Ok)
    }
}
