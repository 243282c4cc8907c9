//! Matrix factorization, as SGD recommenders fit it (Funk's SVD; `surprise`'s `SVD`): a
//! rating is predicted as `mean + b_u + b_i + p_u . q_i`, with `rank` factors per user and
//! per item and, unless `biases = false`, a bias per user and per item around the training
//! ratings' global mean. The loss is half the squared error and every rating is one SGD step
//! (a mini-batch pushes the sum of its ratings' gradients), so `learning_rate` and `l2` mean
//! what they mean in those libraries.
//!
//! The model is one matrix: column `u` holds user `u`'s factors and bias, column
//! `users + i` item `i`'s, one weight row per factor and one for the biases. A mini-batch
//! pulls the columns of the users and items it rates, like the linear models' pruned pull.
//!
//! - [`rows`]: reading `(user, item [, rating])` columns as the rows training takes;
//!   [`rotating`]: the step of model rotation.

pub mod rotating;
pub mod rows;

use std::ops::Range;

use arrow::array::ArrayRef;

use crate::error::{Result, option_err};
use crate::kinds::{Gradient, Inputs, Metric, Ranking, Rotating};
use crate::model::ModelKind;
use crate::options::OptionValue;
use crate::rows::{Gathered, SparseRows};

/// Most factors per user and item: each mini-batch pulls and pushes a row per factor.
pub const MAX_RANK: u64 = 4096;
/// Most users, and most items (their columns must fit the model's key space).
pub const MAX_IDS: u64 = 1 << 40;

/// The options a counter's size can set, and the options naming the counters.
const COUNTER_OPTIONS: [(&str, &str); 2] = [("users", "user_counter"), ("items", "item_counter")];

/// See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Mf {
    /// Factors per user and per item (option `rank`).
    rank: usize,
    /// Number of users: ids run from 0 to users - 1 (option `users`); 0 until set.
    users: u64,
    /// Number of items (option `items`); 0 until set.
    items: u64,
    /// Whether the model has user and item biases around the global mean (option `biases`).
    biases: bool,
    /// The global mean rating (option `mean`): by default the training rows'.
    mean: Option<f64>,
    /// Standard deviation of the factors' random start (option `init_std`).
    init_std: f64,
    /// Counters whose sizes give `users` and `items` (options `user_counter`,
    /// `item_counter`): ids from `ps_index`.
    counters: [Option<String>; 2],
}

impl Default for Mf {
    /// Rank 10, with biases, factors drawn from N(0, 0.1) as `surprise` does.
    fn default() -> Self {
        Mf {
            rank: 10,
            users: 0,
            items: 0,
            biases: true,
            mean: None,
            init_std: 0.1,
            counters: [None, None],
        }
    }
}

impl Mf {
    /// The global mean the prediction starts from (0 without biases).
    fn offset(&self) -> f64 {
        match self.biases {
            true => self.mean.unwrap_or_default(),
            false => 0.0,
        }
    }

    /// The predicted rating of a user and an item from their weights (`user(o)`: weight row
    /// `o` of the user's column): the one formula training, prediction and ranking share.
    fn rating(&self, user: impl Fn(usize) -> f32, item: impl Fn(usize) -> f32) -> f64 {
        let dot: f64 = (0..self.rank)
            .map(|f| f64::from(user(f)) * f64::from(item(f)))
            .sum();
        let biases = match self.biases {
            true => f64::from(user(self.rank)) + f64::from(item(self.rank)),
            false => 0.0,
        };
        self.offset() + biases + dot
    }

    /// The number of users and of items.
    pub fn ids(&self) -> (u64, u64) {
        (self.users, self.items)
    }
}

impl ModelKind for Mf {
    fn name(&self) -> &'static str {
        "mf"
    }

    fn loss_name(&self) -> &'static str {
        "squared"
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        match option.key.to_ascii_lowercase().as_str() {
            "rank" => self.rank = option.whole(1, MAX_RANK)? as usize,
            "users" => self.users = option.whole(1, MAX_IDS)?,
            "items" => self.items = option.whole(1, MAX_IDS)?,
            "biases" => self.biases = option.one_of(&["true", "false"])? == "true",
            "mean" => self.mean = Some(option.number(|_| true, "a finite number")?),
            "init_std" => self.init_std = option.number(|x| x > 0.0, "a finite number above 0")?,
            "user_counter" => self.counters[0] = Some(option.value.to_string()),
            "item_counter" => self.counters[1] = Some(option.value.to_string()),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        let mut options = vec![
            ("rank", self.rank.to_string()),
            ("users", self.users.to_string()),
            ("items", self.items.to_string()),
            ("biases", self.biases.to_string()),
            ("init_std", self.init_std.to_string()),
        ];
        options.extend(self.mean.map(|m| ("mean", m.to_string())));
        for (key, counter) in COUNTER_OPTIONS.iter().zip(&self.counters) {
            options.extend(counter.clone().map(|c| (key.1, c)));
        }
        options
    }

    fn check(&self) -> Result<()> {
        match (self.users, self.items) {
            (0, _) | (_, 0) => option_err(
                "a matrix factorization model needs the options users and items (user ids run \
                 from 0 to users - 1, item ids from 0 to items - 1), or user_counter and \
                 item_counter (sealed counters whose ps_index gives the ids)",
            ),
            _ => Ok(()),
        }
    }

    fn weight_rows(&self) -> usize {
        self.rank + usize::from(self.biases)
    }

    fn dim(&self) -> Option<u64> {
        (self.users > 0 && self.items > 0).then_some(self.users + self.items)
    }

    fn inputs(&self) -> Inputs {
        Inputs::Pairs
    }

    fn wants_label_mean(&self) -> bool {
        self.biases && self.mean.is_none()
    }

    fn rotating(&self) -> Option<&dyn Rotating> {
        Some(self)
    }

    fn random_rows(&self) -> Option<(Range<usize>, f64)> {
        Some((0..self.rank, self.init_std))
    }

    fn ranking(&self) -> Option<&dyn Ranking> {
        Some(self)
    }

    fn counted_options(&self) -> Vec<(&'static str, &'static str, String)> {
        (COUNTER_OPTIONS.iter().zip(&self.counters))
            .filter_map(|(&(option, named), c)| Some((option, named, c.clone()?)))
            .collect()
    }
}

impl Gradient for Mf {
    fn read_rows(
        &self,
        function: &str,
        label: Option<&ArrayRef>,
        inputs: &[ArrayRef],
    ) -> Result<SparseRows> {
        rows::read(
            function,
            (&inputs[0], &inputs[1]),
            label,
            (self.users, self.items),
        )
    }

    fn margins(&self, rows: &SparseRows, r: usize, g: &Gathered, weights: &[f32], out: &mut [f64]) {
        let n = g.keys.len();
        let (u, i) = pair(rows, r, g);
        out[0] = self.rating(|o| weights[o * n + u], |o| weights[o * n + i]);
    }

    fn backprop(
        &self,
        (rows, r, g): (&SparseRows, usize, &Gathered),
        weights: &[f32],
        d: &[f64],
        grads: &mut [f64],
    ) {
        let n = g.keys.len();
        let (u, i) = pair(rows, r, g);
        for f in 0..self.rank {
            let (pu, qi) = (weights[f * n + u], weights[f * n + i]);
            grads[f * n + u] += d[0] * f64::from(qi);
            grads[f * n + i] += d[0] * f64::from(pu);
        }
        if self.biases {
            grads[self.rank * n + u] += d[0];
            grads[self.rank * n + i] += d[0];
        }
    }

    fn mean_gradient(&self) -> bool {
        false
    }

    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64 {
        d[0] = margins[0] - label;
        0.5 * d[0] * d[0]
    }

    fn predict(&self, margins: &[f64]) -> f64 {
        margins[0]
    }

    fn probabilities(&self, _margins: &[f64]) -> Option<Vec<f64>> {
        None
    }

    fn metrics(&self) -> &'static [Metric] {
        &[Metric::Rmse]
    }
}

impl Ranking for Mf {
    fn subjects(&self) -> Range<u64> {
        0..self.users
    }

    fn candidates(&self) -> Range<u64> {
        self.users..self.users + self.items
    }

    /// The predicted rating.
    fn score(&self, user: &[f32], item: &[f32]) -> f64 {
        self.rating(|o| user[o], |o| item[o])
    }
}

/// The slots of row `r`'s user and item among the gathered keys.
pub(super) fn pair(rows: &SparseRows, r: usize, g: &Gathered) -> (usize, usize) {
    let mut slots = rows.row(r, g).map(|(s, _)| s);
    let user = slots.next().unwrap_or_default();
    (user, slots.next().unwrap_or(user))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array};

    use super::*;

    fn model() -> Mf {
        let mut mf = Mf::default();
        for (key, value) in [
            ("rank", "3"),
            ("users", "4"),
            ("items", "5"),
            ("mean", "3.5"),
        ] {
            assert!(mf.set(&OptionValue { key, value }).unwrap());
        }
        mf
    }

    /// Two ratings of the test model, gathered, and weights for their keys (row after row).
    fn two_ratings() -> (Mf, SparseRows, Gathered, Vec<f32>) {
        let mf = model();
        let users: ArrayRef = Arc::new(Int64Array::from(vec![2, 0]));
        let items: ArrayRef = Arc::new(Int64Array::from(vec![1, 4]));
        let ratings: ArrayRef = Arc::new(Float64Array::from(vec![4.0, 1.5]));
        let rows = mf.read_rows("t", Some(&ratings), &[users, items]).unwrap();
        let g = rows.gather(0..2, mf.dim().unwrap());
        let weights = (0..mf.weight_rows() * g.keys.len())
            .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
            .collect();
        (mf, rows, g, weights)
    }

    /// The factors' and biases' gradients against central differences of the loss.
    #[test]
    fn the_gradient_of_a_rating_is_that_of_its_loss() {
        let (mf, rows, g, weights) = two_ratings();
        crate::kinds::checks::gradient_is_that_of_the_loss(&mf, (&rows, &g), &weights);
    }

    /// Rotation's step on weights key after key is the generic path's: the loss and
    /// gradient from `margins` and `backprop` (weights row after row), then plain SGD on the
    /// rating's user and item, the other weights untouched.
    #[test]
    fn the_rotation_step_is_a_plain_sgd_step_on_the_ratings_gradient() {
        let (mf, rows, g, by_row) = two_ratings();
        let (n, k) = (g.keys.len(), mf.weight_rows());
        let mut by_key: Vec<f32> = (0..k * n).map(|i| by_row[(i % k) * n + i / k]).collect();
        let params = angel_optim::OptimizerParams {
            learning_rate: 0.1,
            l2: 0.05,
            ..Default::default()
        };
        let loss = mf.sgd_step((&rows, 1, &g), &mut by_key, &params);
        let (mut m, mut d) = ([0.0], [0.0]);
        mf.margins(&rows, 1, &g, &by_row, &mut m);
        assert_eq!(loss, mf.loss(rows.label(1), &m, &mut d));
        let mut grads = vec![0.0; by_row.len()];
        mf.backprop((&rows, 1, &g), &by_row, &d, &mut grads);
        let stepped: Vec<usize> = rows.row(1, &g).map(|(slot, _)| slot).collect();
        for (at, (&w, &grad)) in by_row.iter().zip(&grads).enumerate() {
            let (o, slot) = (at / n, at % n);
            let expected = match stepped.contains(&slot) {
                true => (f64::from(w) - 0.1 * (grad + 0.05 * f64::from(w))) as f32,
                false => w,
            };
            assert_eq!(
                by_key[slot * k + o],
                expected,
                "weight row {o}, slot {slot}"
            );
        }
    }

    #[test]
    fn options_are_checked_and_fix_the_dimension() {
        let mf = model();
        assert_eq!(mf.dim(), Some(9));
        assert_eq!(mf.weight_rows(), 4);
        assert!(!mf.wants_label_mean());
        let err = Mf::default().check().unwrap_err().to_string();
        assert!(err.contains("users and items"), "{err}");
        let mut mf = Mf::default();
        let err = mf
            .set(&OptionValue {
                key: "rank",
                value: "0",
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("rank = '0'"), "{err}");
    }
}
