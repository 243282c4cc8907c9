//! Factorization machines (Rendle, 2010; Angel's FM): a row's margin is a linear model's plus
//! every pair of its features' interaction, the dot product of their factor vectors:
//!
//! `m = b + sum_i w_i x_i + sum_{i<j} <v_i, v_j> x_i x_j`,
//!
//! computed in `O(k nnz)` as `1/2 sum_f ((sum_i v_if x_i)^2 - sum_i v_if^2 x_i^2)`. The loss of
//! the margin is logistic regression's or linear regression's (option `loss`).
//!
//! The model is one matrix: weight row 0 holds the linear weights and the intercept, rows
//! `1..=factors` one factor each (a feature's column holds its weight and its factor vector),
//! each followed by the optimizer's state, which the servers keep and apply as for every
//! kind. A mini-batch pulls the columns its rows use; the factor rows start at random
//! (`init_std`), as zero factors would never move.

use std::ops::Range;

use crate::error::Result;
use crate::kinds::{Gradient, Metric};
use crate::linear_loss::Linear;
use crate::model::ModelKind;
use crate::options::OptionValue;
use crate::rows::{Gathered, SparseRows};

/// Most factors per feature: each mini-batch pulls and pushes a row per factor.
pub const MAX_FACTORS: u64 = 1024;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Fm {
    /// Factors per feature (option `factors`).
    factors: usize,
    /// The loss of the margin (option `loss`: `logistic` or `squared`).
    objective: Linear,
    /// Standard deviation of the factors' random start (option `init_std`).
    init_std: f64,
}

impl Default for Fm {
    /// 8 factors, logistic loss, factors drawn from N(0, 0.01) (libFM's and Angel's order of
    /// magnitude: small, so the interactions start near zero).
    fn default() -> Self {
        Fm {
            factors: 8,
            objective: Linear::Logistic,
            init_std: 0.01,
        }
    }
}

impl Fm {
    /// Weights of factor `f` of the gathered keys, given every weight row after another.
    fn factor<'a>(&self, weights: &'a [f32], n: usize, f: usize) -> &'a [f32] {
        &weights[(1 + f) * n..(2 + f) * n]
    }
}

impl ModelKind for Fm {
    fn name(&self) -> &'static str {
        "fm"
    }

    fn loss_name(&self) -> &'static str {
        self.objective.loss_name()
    }

    fn set(&mut self, option: &OptionValue) -> Result<bool> {
        match option.key.to_ascii_lowercase().as_str() {
            "factors" | "rank" => self.factors = option.whole(1, MAX_FACTORS)? as usize,
            "loss" => self.objective = Linear::from_loss_option(option)?,
            "init_std" => self.init_std = option.number(|x| x > 0.0, "a finite number above 0")?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn options(&self) -> Vec<(&'static str, String)> {
        vec![
            ("factors", self.factors.to_string()),
            ("loss", self.objective.loss_option().to_string()),
            ("init_std", self.init_std.to_string()),
        ]
    }

    fn weight_rows(&self) -> usize {
        1 + self.factors
    }

    fn random_rows(&self) -> Option<(Range<usize>, f64)> {
        Some((1..1 + self.factors, self.init_std))
    }
}

impl Gradient for Fm {
    fn margins(&self, rows: &SparseRows, r: usize, g: &Gathered, weights: &[f32], out: &mut [f64]) {
        let n = g.keys.len();
        let linear = &weights[..n];
        let mut m = f64::from(linear[n - 1]);
        m += rows
            .row(r, g)
            .map(|(s, x)| f64::from(linear[s]) * x)
            .sum::<f64>();
        for f in 0..self.factors {
            let v = self.factor(weights, n, f);
            let (sum, squares) = rows.row(r, g).fold((0.0, 0.0), |(sum, squares), (s, x)| {
                let vx = f64::from(v[s]) * x;
                (sum + vx, squares + vx * vx)
            });
            m += 0.5 * (sum * sum - squares);
        }
        out[0] = m;
    }

    /// `dm/dw_i = x_i`, `dm/db = 1`, and `dm/dv_if = x_i (sum_j v_jf x_j - v_if x_i)`.
    fn backprop(
        &self,
        (rows, r, g): (&SparseRows, usize, &Gathered),
        weights: &[f32],
        d: &[f64],
        grads: &mut [f64],
    ) {
        let (n, d) = (g.keys.len(), d[0]);
        if d == 0.0 {
            return;
        }
        rows.add_gradient(r, g, d, &mut grads[..n]);
        for f in 0..self.factors {
            let v = self.factor(weights, n, f);
            let sum: f64 = rows.row(r, g).map(|(s, x)| f64::from(v[s]) * x).sum();
            let grads = &mut grads[(1 + f) * n..(2 + f) * n];
            for (s, x) in rows.row(r, g) {
                grads[s] += d * x * (sum - f64::from(v[s]) * x);
            }
        }
    }

    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64 {
        self.objective.loss(label, margins, d)
    }

    fn predict(&self, margins: &[f64]) -> f64 {
        self.objective.predict(margins)
    }

    fn probabilities(&self, margins: &[f64]) -> Option<Vec<f64>> {
        self.objective.probabilities(margins)
    }

    fn metrics(&self) -> &'static [Metric] {
        self.objective.metrics()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, ListArray};
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::kinds::checks::gradient_is_that_of_the_loss;

    fn model(loss: &str) -> Fm {
        let mut fm = Fm::default();
        for (key, value) in [("factors", "3"), ("loss", loss)] {
            assert!(fm.set(&OptionValue { key, value }).unwrap());
        }
        fm
    }

    /// Two rows over features of a model of 6, gathered, and weights for their keys (weight
    /// row after weight row).
    fn two_rows(fm: &Fm) -> (SparseRows, Gathered, Vec<f32>) {
        let idx: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(0), Some(2), Some(5)]),
            Some(vec![Some(1), Some(2)]),
        ]));
        let val: ArrayRef = Arc::new(ListArray::from_iter_primitive::<
            arrow::datatypes::Float64Type,
            _,
            _,
        >(vec![
            Some(vec![Some(0.5), Some(-1.5), Some(2.0)]),
            Some(vec![Some(1.0), Some(0.25)]),
        ]));
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 0.0]));
        let rows = fm.read_rows("t", Some(&labels), &[idx, val]).unwrap();
        let g = rows.gather(0..2, 6);
        let weights = (0..fm.weight_rows() * g.keys.len())
            .map(|i| ((i * 37 % 11) as f32 - 5.0) / 7.0)
            .collect();
        (rows, g, weights)
    }

    /// The margin is the pairwise sum it stands for, computed the slow way.
    #[test]
    fn the_margin_sums_every_pair_of_features_interaction() {
        let fm = model("logistic");
        let (rows, g, weights) = two_rows(&fm);
        let n = g.keys.len();
        for r in 0..2 {
            let x: Vec<(usize, f64)> = rows.row(r, &g).collect();
            let mut expected = f64::from(weights[n - 1]);
            for (i, &(s, v)) in x.iter().enumerate() {
                expected += f64::from(weights[s]) * v;
                for &(t, u) in &x[i + 1..] {
                    let dot: f64 = (0..3)
                        .map(|f| {
                            let factor = fm.factor(&weights, n, f);
                            f64::from(factor[s]) * f64::from(factor[t])
                        })
                        .sum();
                    expected += dot * v * u;
                }
            }
            let mut m = [0.0];
            fm.margins(&rows, r, &g, &weights, &mut m);
            assert!(
                (m[0] - expected).abs() < 1e-9,
                "row {r}: {} vs {expected}",
                m[0]
            );
        }
    }

    /// Every weight's gradient (linear, intercept, factors) against central differences of
    /// the loss, for both losses.
    #[test]
    fn the_gradient_is_that_of_the_loss() {
        for loss in ["logistic", "squared"] {
            let fm = model(loss);
            let (rows, g, weights) = two_rows(&fm);
            gradient_is_that_of_the_loss(&fm, (&rows, &g), &weights);
        }
    }

    #[test]
    fn options_set_the_factor_rows() {
        let fm = model("squared");
        assert_eq!(fm.weight_rows(), 4);
        assert_eq!(fm.random_rows(), Some((1..4, 0.01)));
        assert_eq!(fm.loss_name(), "squared");
        let mut fm = Fm::default();
        let zero = OptionValue {
            key: "factors",
            value: "0",
        };
        let err = fm.set(&zero).unwrap_err().to_string();
        assert!(err.contains("factors = '0'"), "{err}");
    }
}
