//! Matrix factorization under model rotation: the items' columns rotate, and a rating's SGD
//! step works on its user's and item's weights side by side.

use std::ops::Range;

use angel_optim::builtin::Sgd;
use angel_optim::{Optimizer, OptimizerParams};

use crate::kinds::{Ranking, Rotating};
use crate::model::ModelKind;
use crate::rows::{Gathered, SparseRows};

use super::{Mf, pair};

impl Rotating for Mf {
    fn rotated_columns(&self) -> Range<u64> {
        self.candidates()
    }

    /// The rating's error `e` under the weights before the step, then each factor's step
    /// with gradient `e q_if` (user) and `e p_uf` (item), and the biases' with `e`.
    fn sgd_step(
        &self,
        (rows, r, g): (&SparseRows, usize, &Gathered),
        weights: &mut [f32],
        params: &OptimizerParams,
    ) -> f64 {
        let stride = self.weight_rows();
        let (u, i) = pair(rows, r, g);
        let (u, i) = (u * stride, i * stride);
        let e = self.rating(|o| weights[u + o], |o| weights[i + o]) - rows.label(r);
        let step = |w: &mut f32, g: f64| {
            let mut slot = [f64::from(*w)];
            Sgd.apply(&mut slot, g, params);
            *w = slot[0] as f32;
        };
        for f in 0..self.rank {
            let (p, q) = (f64::from(weights[u + f]), f64::from(weights[i + f]));
            step(&mut weights[u + f], e * q);
            step(&mut weights[i + f], e * p);
        }
        if self.biases {
            step(&mut weights[u + self.rank], e);
            step(&mut weights[i + self.rank], e);
        }
        0.5 * e * e
    }
}
