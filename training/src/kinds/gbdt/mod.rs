//! Gradient-boosted decision trees, trained on the PS as Angel trains them: each worker
//! builds gradient/hessian histograms of its rows per tree node and pushes them, the partial
//! histograms add up on the servers, each server finds the best split in its part of a node's
//! histogram (the PS function `best_split`) and the best of their answers is taken, so no
//! histogram crosses the network twice and no worker holds the whole model.
//!
//! The rows are `label, indices [, values]` as the linear models read them; a feature a row
//! does not list is missing, and each split learns which way missing values go (XGBoost's
//! sparsity-aware default direction).
//!
//! - [`sketch`]: candidate split values per feature from quantile sketches merged on the PS;
//! - [`binned`]: a worker's rows as (feature, bin) pairs;
//! - [`tree`]: a tree as one row of the model's matrix, and the prediction it makes;
//! - [`worker`]: a worker's rows, their margins, gradients and nodes, kept for the statement;
//! - [`partition`]: the rows at each node of the tree being grown;
//! - [`task`]: a worker's round in a statement (`ps_train`);
//! - [`resident`]: workers kept in a process between rounds whose rows come as new batches;
//! - [`grower`]: the statement's side: histograms, splits and leaves, layer by layer;
//! - [`driver`]: the statement's rounds and trees, the epoch table;
//! - [`saved`]: its saved format, `trees.parquet` and `importance.parquet`;
//! - [`grown`]: the rows of a model's matrix that hold its trees;
//! - [`predict`]: the margins of rows under the trees (`ps_predict`);
//! - [`importance`]: each feature's splits, gain and cover over the trees;
//! - [`sample`]: the rows and features each tree samples.

pub mod binned;
pub mod driver;
pub mod grower;
pub mod grown;
pub mod importance;
pub mod partition;
pub mod predict;
pub mod resident;
pub mod sample;
pub mod saved;
pub mod sketch;
pub mod task;
pub mod tree;
pub mod worker;

use std::collections::HashMap;

use angel_client::{MatrixSpec, PsClient};
use arrow::array::RecordBatch;

use crate::error::{Result, option_err};
use crate::kinds::Gradient;
use crate::linear_loss::Linear;
use crate::model::{Engine, Model, ModelKind, ModelSpec, Trains};
use crate::options::OptionValue;
use crate::rows::SparseRows;
use crate::saved::{ReadBack, Saved, SavedTable, TableSink};
use crate::task_pass::{TaskContext, TaskPass};

/// The deepest trees allowed: a tree is one row of `2^(depth + 1) - 1` nodes.
pub const MAX_DEPTH: u64 = 10;
/// Most bins a feature's histogram may have.
pub const MAX_BINS: u64 = 256;
/// Most trees a model may have.
pub const MAX_TREES: u64 = 100_000;
/// Most values of a model's trees kept dense: 2^23 (64 MiB). A larger model (many deep trees)
/// is kept sparse, each tree holding only the nodes it grew, so its size on the servers is
/// what the trees hold, never trees x nodes reserved up front.
const MAX_DENSE_TREES: u64 = 1 << 23;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Gbdt {
    /// Trees to grow (option `trees`).
    pub trees: usize,
    /// Depth of each tree: a root and at most `depth` layers of children (option `depth`).
    pub depth: usize,
    /// Shrinkage of every leaf (option `learning_rate`).
    pub learning_rate: f64,
    /// Histogram bins per feature (option `bins`).
    pub bins: usize,
    /// Least hessian sum of a child (option `min_child_weight`).
    pub min_child_weight: f64,
    /// L2 regularisation of the leaf values (option `l2`, XGBoost's lambda).
    pub l2: f64,
    /// Least loss reduction of a split (option `min_gain`, XGBoost's gamma).
    pub min_gain: f64,
    /// Trees grown without a better holdout loss after which growing stops and the model
    /// keeps the trees of its best holdout loss (option `early_stopping_rounds`; 0: never).
    pub early_stopping_rounds: usize,
    /// The share of the rows each tree samples (option `subsample`).
    pub subsample: f64,
    /// The share of the features each tree samples (option `colsample_bytree`).
    pub colsample_bytree: f64,
    /// The seed of the samples' draws (option `seed`).
    pub seed: u64,
    /// The loss (option `loss`: `logistic` or `squared`) and what is predicted from a row's
    /// margin, as the linear kind of that loss predicts it.
    pub objective: Linear,
}

impl Default for Gbdt {
    /// XGBoost's defaults, 100 trees of depth 6 and 32 bins.
    fn default() -> Self {
        Gbdt {
            trees: 100,
            depth: 6,
            learning_rate: 0.1,
            bins: 32,
            min_child_weight: 1.0,
            l2: 1.0,
            min_gain: 0.0,
            early_stopping_rounds: 0,
            subsample: 1.0,
            colsample_bytree: 1.0,
            seed: 0,
            objective: Linear::Logistic,
        }
    }
}

#[async_trait::async_trait]
impl ModelKind for Gbdt {
    fn name(&self) -> &'static str {
        "gbdt"
    }

    fn loss_name(&self) -> &'static str {
        self.objective.loss_name()
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        let at_least_0 = |o: &OptionValue| o.number(|x| x >= 0.0, "a finite number, 0 or more");
        let fraction = |o: &OptionValue| o.number(|x| x > 0.0 && x <= 1.0, "above 0 and at most 1");
        match option.key.to_ascii_lowercase().as_str() {
            "trees" => self.trees = option.whole(1, MAX_TREES)? as usize,
            "depth" => self.depth = option.whole(1, MAX_DEPTH)? as usize,
            "learning_rate" | "lr" | "eta" => {
                self.learning_rate = option.number(|x| x > 0.0, "a finite number above 0")?
            }
            "bins" => self.bins = option.whole(2, MAX_BINS)? as usize,
            "min_child_weight" => self.min_child_weight = at_least_0(option)?,
            "l2" | "lambda" => self.l2 = at_least_0(option)?,
            "min_gain" | "gamma" => self.min_gain = at_least_0(option)?,
            "early_stopping_rounds" => {
                self.early_stopping_rounds = option.whole(0, MAX_TREES)? as usize
            }
            "subsample" | "bagging_fraction" => self.subsample = fraction(option)?,
            "colsample_bytree" | "feature_fraction" => self.colsample_bytree = fraction(option)?,
            "seed" => self.seed = option.whole(0, u64::MAX)?,
            "loss" => self.objective = Linear::from_loss_option(option)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        let loss = self.objective.loss_option();
        vec![
            ("trees", self.trees.to_string()),
            ("depth", self.depth.to_string()),
            ("learning_rate", self.learning_rate.to_string()),
            ("bins", self.bins.to_string()),
            ("min_child_weight", self.min_child_weight.to_string()),
            ("l2", self.l2.to_string()),
            ("min_gain", self.min_gain.to_string()),
            (
                "early_stopping_rounds",
                self.early_stopping_rounds.to_string(),
            ),
            ("subsample", self.subsample.to_string()),
            ("colsample_bytree", self.colsample_bytree.to_string()),
            ("seed", self.seed.to_string()),
            ("loss", loss.to_string()),
        ]
    }

    fn check(&self) -> Result<()> {
        if self.l2 == 0.0 && self.min_child_weight == 0.0 {
            return option_err(
                "a gbdt model needs l2 or min_child_weight above 0: with both at 0 a leaf of \
                 no hessian has no value",
            );
        }
        Ok(())
    }

    /// A row per tree.
    fn weight_rows(&self) -> usize {
        self.trees
    }

    /// Its objective's: its trees' leaves add up to the margin.
    fn scoring(&self) -> Option<&dyn Gradient> {
        Some(&self.objective)
    }

    /// A row per tree, of its nodes ([`tree::columns`]), in f64: the trees keep no
    /// optimizer state. Dense up to [`MAX_DENSE_TREES`] values, sparse above.
    fn matrix(&self, name: &str, rows: u64, _dim: u64) -> Result<MatrixSpec> {
        let cols = tree::columns(self.depth);
        let spec = match rows.saturating_mul(cols) <= MAX_DENSE_TREES {
            true => MatrixSpec::dense(name, rows, cols),
            false => MatrixSpec::sparse(name, rows, cols),
        };
        Ok(spec.value_type(angel_client::ValueType::F64))
    }

    fn refuses_more_epochs(&self) -> Option<&'static str> {
        Some(
            "a boosted model grows all its trees in the statement that creates it; grow more \
             with CREATE OR REPLACE MODEL and a larger trees option",
        )
    }

    /// A row per node of every tree, and one per feature (its importance).
    fn saved_values(&self, dim: u64) -> u64 {
        (self.trees as u64 * (tree::nodes(self.depth) * tree::FIELDS) as u64).saturating_add(dim)
    }

    fn companions(&self, model: &str) -> Vec<String> {
        let names = grower::Names::of(model);
        vec![names.sketch, names.cuts, names.histograms, names.totals]
    }

    fn margins_of(&self, model: &Model, _function: &str, rows: &SparseRows) -> Result<Vec<f64>> {
        predict::margins(model, rows)
    }
}

#[async_trait::async_trait]
impl Trains for Gbdt {
    fn gradient(&self) -> Option<&dyn Gradient> {
        None
    }

    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
        Ok(Box::new(task::TreeTask::new(model, self.clone(), context)))
    }

    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch> {
        driver::train(engine, self).await
    }

    fn saved_tables(&self) -> Vec<SavedTable> {
        saved::tables()
    }

    async fn save(
        &self,
        client: &PsClient,
        (name, _): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
        sink: &mut dyn TableSink,
    ) -> Result<Saved> {
        saved::save(client, name, features, sink).await
    }

    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()> {
        saved::load(client, name, (self, spec), read).await
    }
}

impl Gbdt {
    /// The boosting options of `model`, which `function` uses; an error naming both when the
    /// model is of another kind.
    pub fn of(model: &Model, function: &str) -> Result<Gbdt> {
        let wanted = "a boosted model (kind = 'gbdt')";
        (model.spec.kind.own().cloned()).map_or_else(|| model.refuse(function, wanted), Ok)
    }

    /// A row's second derivative of the loss at `margin`, beside the first (`d`): the
    /// hessian the trees' Newton steps divide by.
    pub fn hessian(&self, margin: f64) -> f64 {
        match self.objective {
            Linear::Logistic => {
                let p = 1.0 / (1.0 + (-margin).exp());
                (p * (1.0 - p)).max(1e-16)
            }
            _ => 1.0,
        }
    }

    /// The margin every row starts from: the mean target's (LightGBM's boost from average),
    /// so the first tree fits what the mean leaves.
    pub fn base_margin(&self, mean_target: f64) -> f64 {
        match self.objective {
            Linear::Logistic => {
                let p = mean_target.clamp(1e-6, 1.0 - 1e-6);
                (p / (1.0 - p)).ln()
            }
            _ => mean_target,
        }
    }

    /// The label as the loss sees it (1 or 0 for the logistic loss).
    pub fn target(&self, label: f64) -> f64 {
        match self.objective {
            Linear::Logistic => f64::from(label > 0.0),
            _ => label,
        }
    }

    /// A leaf's value from its rows' gradient and hessian sums: the Newton step, shrunk.
    pub fn leaf_value(&self, (g, h): (f64, f64)) -> f64 {
        -self.learning_rate * g / (h + self.l2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_and_checked() {
        let mut gbdt = Gbdt::default();
        for (key, value) in [
            ("trees", "7"),
            ("depth", "3"),
            ("eta", "0.3"),
            ("loss", "squared"),
            ("feature_fraction", "0.5"),
        ] {
            assert!(gbdt.set(&OptionValue { key, value }).unwrap(), "{key}");
        }
        assert_eq!((gbdt.trees, gbdt.depth, gbdt.learning_rate), (7, 3, 0.3));
        assert_eq!(gbdt.colsample_bytree, 0.5);
        let err = (gbdt.set(&OptionValue {
            key: "subsample",
            value: "0",
        }))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("subsample") && err.contains("above 0"),
            "{err}"
        );
        assert_eq!(
            (gbdt.objective, gbdt.weight_rows()),
            (Linear::Regression, 7)
        );
        let err = (gbdt.set(&OptionValue {
            key: "depth",
            value: "11",
        }))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("depth = '11'") && err.contains("1 to 10"),
            "{err}"
        );
        for (key, value) in [("l2", "0"), ("min_child_weight", "0")] {
            gbdt.set(&OptionValue { key, value }).unwrap();
        }
        assert!(gbdt.check().is_err());
    }

    #[test]
    fn the_hessian_is_the_derivative_of_the_gradient() {
        let gbdt = Gbdt::default();
        for m in [-3.0, -0.2, 0.0, 1.5] {
            let d = |m: f64| {
                let mut d = [0.0];
                gbdt.objective.loss(1.0, &[m], &mut d);
                d[0]
            };
            let numeric = (d(m + 1e-6) - d(m - 1e-6)) / 2e-6;
            assert!((gbdt.hessian(m) - numeric).abs() < 1e-6, "{m}");
        }
        assert!((gbdt.base_margin(0.5)).abs() < 1e-12);
    }
}
