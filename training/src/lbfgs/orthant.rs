//! [`Orthant`]: OWL-QN's steps on the servers (Andrew and Gao, 2007), for the objective plus
//! an L1 penalty on every weight but the intercepts: the pseudo-gradient the direction is
//! computed from, the direction kept where it descends, and each trial point projected onto
//! the orthant of the point it left, so weights that cross zero stop at zero: the exact zeros
//! an L1 penalty is for.

use super::vectors::{DIRECTION, GRADIENT, POINT, PSEUDO_GRADIENT, Vectors, WEIGHTS};
use crate::error::Result;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Orthant {
    vectors: Vectors,
    l1: f64,
    /// The intercepts' column: the first one the penalty leaves alone.
    bias: u64,
}

impl Orthant {
    /// OWL-QN's steps among `vectors`, penalised by `l1`, the intercepts in column `bias`.
    pub fn new(vectors: Vectors, l1: f64, bias: u64) -> Self {
        Orthant { vectors, l1, bias }
    }

    /// [`PSEUDO_GRADIENT`] at the [`WEIGHTS`] from the [`GRADIENT`] of the rest of the
    /// objective.
    pub async fn pseudo_gradient(&self) -> Result<()> {
        let args = [self.l1, self.bias as f64];
        let operands = [WEIGHTS, GRADIENT, PSEUDO_GRADIENT];
        self.vectors.each(&operands, "pseudo_gradient", &args).await
    }

    /// Zeroes the [`DIRECTION`] where it does not descend along the pseudo-gradient.
    pub async fn constrain(&self) -> Result<()> {
        let operands = [DIRECTION, PSEUDO_GRADIENT];
        (self.vectors)
            .each(&operands, "orthant_direction", &[self.bias as f64])
            .await
    }

    /// Zeroes the [`WEIGHTS`] that left the orthant of the [`POINT`] they were stepped from.
    pub async fn project(&self) -> Result<()> {
        let operands = [WEIGHTS, POINT, PSEUDO_GRADIENT];
        (self.vectors)
            .each(&operands, "orthant_project", &[self.bias as f64])
            .await
    }
}
