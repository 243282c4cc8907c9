//! [`CentresTask`]: one task's part of a k-means pass.
//!
//! - Lloyd's: it pulls the `k` centres once (they do not move during the pass), assigns each
//!   of its rows to the nearest, and pushes the sums and counts per centre into the model's
//!   sums rows once, when its rows end: the pushes of every task add up on the servers to the
//!   sums over the whole data set.
//! - Mini-batch: per record batch of rows it pulls the centres and their sizes, takes a
//!   [`Local`] step every `batch_size` rows that moves the centres to their rows' means, and
//!   pushes the steps' summed moves.

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, PushOptions};
use arrow::array::ArrayRef;

use super::centres::{Assigned, Centres};
use super::minibatch::Local;
use super::points::Points;
use super::{Algorithm, KMeans, predict};
use crate::error::Result;
use crate::model::Model;
use crate::task_pass::{Progress, TaskPass, Trained};

/// See the module documentation.
#[derive(Debug)]
pub struct CentresTask {
    model: Model,
    function: &'static str,
    k: usize,
    /// Rows per step in mini-batch k-means; None for Lloyd's.
    batch: Option<usize>,
    /// The centres of Lloyd's pass, pulled at its first rows.
    centres: Option<Centres>,
    assigned: Assigned,
    /// Names of the task's pushes, taken at its first rows.
    names: Option<ChangeNames>,
}

impl CentresTask {
    /// A pass of `function` over k-means model `model` of options `kmeans`.
    pub fn new(model: Model, kmeans: &KMeans, function: &'static str) -> Self {
        let dim = model.spec.dim as usize;
        let batch = (kmeans.algorithm == Algorithm::MiniBatch).then_some(model.spec.batch_size);
        CentresTask {
            model,
            function,
            k: kmeans.k,
            batch,
            centres: None,
            assigned: Assigned::new(kmeans.k, dim),
            names: None,
        }
    }

    /// Assigns one batch of rows (the columns after the id), moving the centres at every
    /// mini-batch in mini-batch k-means; returns their number and summed squared distance to
    /// their centres.
    pub fn add(&mut self, inputs: &[ArrayRef]) -> Result<(u64, f64)> {
        let (model, dim) = (&self.model, self.model.spec.dim);
        let rows = Points::read(self.function, &model.name, dim, inputs)?;
        if rows.is_empty() {
            return Ok((0, 0.0));
        }
        if self.names.is_none() {
            self.names = ChangeNames::for_accumulator();
        }
        let (before, inertia) = (self.assigned.rows, self.assigned.inertia);
        match self.batch {
            Some(size) => self.mini_batches(&rows, size)?,
            None => {
                if self.centres.is_none() {
                    self.centres = Some(predict::pull(model, self.k)?);
                }
                let centres = self.centres.as_ref().expect("pulled above");
                self.assigned.add(centres, &rows, 0..rows.len());
            }
        }
        Ok((self.assigned.rows - before, self.assigned.inertia - inertia))
    }

    /// Mini-batch k-means over `rows`, `size` rows a step, on the centres pulled once; their
    /// moves pushed once.
    fn mini_batches(&mut self, rows: &Points, size: usize) -> Result<()> {
        let dim = self.model.spec.dim as usize;
        let (centres, sizes) = predict::pull_sized(&self.model, self.k)?;
        let mut local = Local::new(centres, sizes);
        for start in (0..rows.len()).step_by(size) {
            let mut batch = Assigned::new(self.k, dim);
            batch.add(&local.centres, rows, start..(start + size).min(rows.len()));
            local.step(&batch);
            self.assigned.rows += batch.rows;
            self.assigned.inertia += batch.inertia;
        }
        let (moved, values) = local.increments();
        let keys: Vec<u64> = (0..=dim as u64).collect();
        self.push(&moved, &keys, &values)
    }

    /// The task's rows ended: pushes Lloyd's sums and counts.
    pub fn finish(&mut self) -> Result<()> {
        if self.assigned.rows == 0 || self.batch.is_some() {
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
        self.push(&rows, &keys, &values)
    }

    /// Pushes `values` to `rows` x `keys` of the model, named, so a rerun of the task repeats
    /// the push without effect.
    fn push(&mut self, rows: &[u64], keys: &[u64], values: &[f32]) -> Result<()> {
        let how = PushOptions {
            change: self.names.as_mut().map(ChangeNames::next_change),
            ..Default::default()
        };
        let (model, client) = (&self.model, self.model.client());
        block_on(client.push_with(&model.name, rows, keys, values, how))?;
        Ok(())
    }
}

/// Assigns the points as they come; pushes Lloyd's sums when they end.
impl TaskPass for CentresTask {
    fn add(&mut self, columns: &[ArrayRef], progress: Progress) -> Result<Trained> {
        let (rows, inertia) = CentresTask::add(self, columns)?;
        progress(rows, inertia);
        Ok(Trained {
            rows,
            loss: inertia,
        })
    }

    fn finish(&mut self, _: Progress) -> Result<Trained> {
        CentresTask::finish(self)?;
        Ok(Trained::default())
    }
}
