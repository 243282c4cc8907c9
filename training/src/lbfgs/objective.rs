//! [`Objective`]: what a full-batch model minimises, the mean loss of its rows plus the
//! penalties `l1 |w|_1 + l2 / 2 |w|^2` on every weight but the intercepts (as scikit-learn and
//! Spark MLlib leave them out), and the gradient of all but the L1 part, made on the servers
//! from the workers' summed one.

use super::vectors::{NEXT_GRADIENT, Vectors, WEIGHTS};
use crate::error::Result;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Objective {
    vectors: Vectors,
    l1: f64,
    l2: f64,
    /// The intercepts' column.
    bias: u64,
}

impl Objective {
    /// The objective of the model of `vectors`, penalised by `l1` and `l2`, its intercepts in
    /// column `bias`.
    pub fn new(vectors: Vectors, (l1, l2): (f64, f64), bias: u64) -> Self {
        Objective {
            vectors,
            l1,
            l2,
            bias,
        }
    }

    /// After a pass in which the workers pushed the summed gradient of their `rows` rows' loss
    /// into [`NEXT_GRADIENT`], with `mean_loss` their mean loss: turns it into the gradient of
    /// the smooth part of the objective and returns the objective.
    pub async fn at_pass(&self, mean_loss: f64, rows: u64) -> Result<f64> {
        let v = &self.vectors;
        v.scale(NEXT_GRADIENT, 1.0 / rows.max(1) as f64).await?;
        if self.l1 == 0.0 && self.l2 == 0.0 {
            return Ok(mean_loss);
        }
        let intercepts = v.column(WEIGHTS, self.bias).await?;
        let mut objective = mean_loss;
        if self.l1 > 0.0 {
            let absolute = v.reduce("asum", WEIGHTS).await?;
            let intercepts: f64 = intercepts.iter().map(|b| b.abs()).sum();
            objective += self.l1 * (absolute - intercepts);
        }
        if self.l2 > 0.0 {
            let squares = v.dot(WEIGHTS, WEIGHTS).await?;
            v.axpy(self.l2, WEIGHTS, NEXT_GRADIENT).await?;
            let unpenalised: Vec<f64> = intercepts.iter().map(|b| -self.l2 * b).collect();
            v.add_to_column(NEXT_GRADIENT, self.bias, &unpenalised)
                .await?;
            let intercepts: f64 = intercepts.iter().map(|b| b * b).sum();
            objective += 0.5 * self.l2 * (squares - intercepts);
        }
        Ok(objective)
    }
}
