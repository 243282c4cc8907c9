//! [`ClusterTask`]: one task's part of a Lloyd iteration. It pulls the `k` centres once (they
//! do not move during the pass), assigns each of its rows to the nearest, and pushes the sums
//! and counts per centre into the model's sums rows once, when its rows end: the pushes of
//! every task add up on the servers to the sums over the whole data set.

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, PushOptions};
use arrow::array::ArrayRef;

use super::centres::{Assigned, Centres};
use super::{KMeans, points, predict};
use crate::error::Result;
use crate::model::Model;

/// See the module documentation.
#[derive(Debug)]
pub struct ClusterTask {
    model: Model,
    function: &'static str,
    k: usize,
    centres: Option<Centres>,
    assigned: Assigned,
}

impl ClusterTask {
    /// A pass of `function` over k-means model `model`.
    pub fn new(model: Model, function: &'static str) -> Result<Self> {
        let k = KMeans::of(&model, function)?.k;
        let dim = model.spec.dim as usize;
        Ok(ClusterTask {
            model,
            function,
            k,
            centres: None,
            assigned: Assigned::new(k, dim),
        })
    }

    /// Assigns one batch of rows (the columns after the id); returns their number and summed
    /// squared distance to their centres.
    pub fn add(&mut self, inputs: &[ArrayRef]) -> Result<(u64, f64)> {
        let (model, dim) = (&self.model, self.model.spec.dim);
        let rows = points::read(self.function, &model.name, dim, inputs)?;
        if self.centres.is_none() {
            self.centres = Some(predict::pull(model, self.k)?);
        }
        let centres = self.centres.as_ref().expect("pulled above");
        let (before, inertia) = (self.assigned.rows, self.assigned.inertia);
        self.assigned.add(centres, &rows);
        Ok((self.assigned.rows - before, self.assigned.inertia - inertia))
    }

    /// The task's rows ended: pushes its sums and counts (named, so a rerun of the task
    /// repeats the push without effect).
    pub fn finish(&mut self) -> Result<()> {
        if self.assigned.rows == 0 {
            return Ok(());
        }
        let width = self.model.spec.dim as usize + 1;
        let sums = &self.assigned.sums;
        let keys: Vec<u64> = (0..width)
            .filter(|&c| (0..self.k).any(|k| sums[k * width + c] != 0.0))
            .map(|c| c as u64)
            .collect();
        let values: Vec<f32> = (0..self.k)
            .flat_map(|k| {
                keys.iter()
                    .map(move |&c| sums[k * width + c as usize] as f32)
            })
            .collect();
        let rows: Vec<u64> = (self.k as u64..2 * self.k as u64).collect();
        let change = ChangeNames::for_accumulator().map(|mut names| names.next_change());
        let how = PushOptions {
            change,
            ..Default::default()
        };
        let (model, client) = (&self.model, self.model.client());
        block_on(client.push_with(&model.name, &rows, &keys, &values, how))?;
        Ok(())
    }
}
