//! [`Vectors`]: a full-batch model's vectors on the servers (its weights, the gradient, the
//! direction, the history's pairs), each one row per output of the model's matrix, and the
//! PS functions that combine them (`dot`, `axpy`, `copy`, `scale`, `zero`): only scalars come
//! back to the job.
//!
//! Output `o`'s group of rows holds, after its weights (row `o * group`), the vectors
//! [`GRADIENT`], [`DIRECTION`], [`NEXT_GRADIENT`], [`POINT`], [`PSEUDO_GRADIENT`] and then the
//! pairs; every row of a group sits in the same blocks, so each function runs block by block
//! where the data is.

use std::sync::Arc;

use angel_client::{PsClient, PushOptions};

use crate::error::Result;

/// A vector: the offset of its row in every output's group.
pub type Vector = u64;

/// The weights (the model itself).
pub const WEIGHTS: Vector = 0;
/// The gradient of the objective at the current point.
pub const GRADIENT: Vector = 1;
/// The search direction.
pub const DIRECTION: Vector = 2;
/// What the workers push: the summed gradient of their rows' loss at the point being tried,
/// turned into the objective's gradient there by the job.
pub const NEXT_GRADIENT: Vector = 3;
/// The point the iteration started from: the weights of a failed trial go back to it, and
/// trials of OWL-QN are projected onto its orthant.
pub const POINT: Vector = 4;
/// OWL-QN's pseudo-gradient at the current point (the L1 penalty's share in it).
pub const PSEUDO_GRADIENT: Vector = 5;
/// The first of the pairs' rows.
pub(super) const PAIRS: Vector = 6;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Vectors {
    client: Arc<PsClient>,
    matrix: String,
    outputs: u64,
    group: u64,
}

impl Vectors {
    /// The vectors of `matrix`, whose `outputs` groups have `group` rows each.
    pub fn new(client: Arc<PsClient>, matrix: &str, outputs: usize, group: usize) -> Self {
        Vectors {
            client,
            matrix: matrix.to_string(),
            outputs: outputs as u64,
            group: group as u64,
        }
    }

    /// Rows of vector `v`, output after output.
    pub fn rows(&self, v: Vector) -> Vec<u64> {
        (0..self.outputs).map(|o| o * self.group + v).collect()
    }

    /// `x . y` over every output.
    pub async fn dot(&self, x: Vector, y: Vector) -> Result<f64> {
        let mut sum = 0.0;
        for (a, b) in self.rows(x).into_iter().zip(self.rows(y)) {
            let answer = self.call("dot", &[a, b], &[]).await?;
            sum += answer.first().copied().unwrap_or_default();
        }
        Ok(sum)
    }

    /// Reduction `name` (one that adds up over blocks: `asum`, `nnz`, `sum`) of `x` over every
    /// output.
    pub async fn reduce(&self, name: &str, x: Vector) -> Result<f64> {
        let mut sum = 0.0;
        for row in self.rows(x) {
            sum += self
                .call(name, &[row], &[])
                .await?
                .first()
                .copied()
                .unwrap_or_default();
        }
        Ok(sum)
    }

    /// `y += a x`.
    pub async fn axpy(&self, a: f64, x: Vector, y: Vector) -> Result<()> {
        self.each(&[x, y], "axpy", &[a]).await
    }

    /// `y = x`.
    pub async fn copy(&self, x: Vector, y: Vector) -> Result<()> {
        self.each(&[x, y], "copy", &[]).await
    }

    /// `x *= a`.
    pub async fn scale(&self, x: Vector, a: f64) -> Result<()> {
        self.each(&[x], "scale", &[a]).await
    }

    /// `x = 0`.
    pub async fn zero(&self, x: Vector) -> Result<()> {
        self.each(&[x], "zero", &[]).await
    }

    /// Column `key` of vector `v`, output after output.
    pub async fn column(&self, v: Vector, key: u64) -> Result<Vec<f64>> {
        let rows = self.rows(v);
        let (values, _) = (self.client)
            .pull_at::<f32>(&self.matrix, &rows, &[key], None)
            .await?;
        Ok(values.into_iter().map(f64::from).collect())
    }

    /// Adds `values` (output after output) to column `key` of vector `v`.
    pub async fn add_to_column(&self, v: Vector, key: u64, values: &[f64]) -> Result<()> {
        let values: Vec<f32> = values.iter().map(|&x| x as f32).collect();
        let how = PushOptions::default();
        (self.client)
            .push_with(&self.matrix, &self.rows(v), &[key], &values, how)
            .await?;
        Ok(())
    }

    /// Runs PS function `name` on the rows of `vectors` of every output.
    pub(super) async fn each(&self, vectors: &[Vector], name: &str, args: &[f64]) -> Result<()> {
        for o in 0..self.outputs {
            let rows: Vec<u64> = vectors.iter().map(|v| o * self.group + v).collect();
            self.call(name, &rows, args).await?;
        }
        Ok(())
    }

    async fn call(&self, name: &str, rows: &[u64], args: &[f64]) -> Result<Vec<f64>> {
        let operands: Vec<(&str, u64)> = rows.iter().map(|&r| (self.matrix.as_str(), r)).collect();
        Ok(self.client.psf(name, &operands, args).await?)
    }
}
