//! [`TaskPass`]: one task's part of a training pass over its rows, the worker half of every
//! kind of model behind one interface. `ps_train` hands it each batch of its columns and says
//! when its rows end; what the pass does with them (mini-batch steps, a full gradient, a
//! rotation round, a sampling round, a boosting round, Lloyd's sums) is the kind's, which
//! opens it ([`crate::ModelKind::open_pass`]).
//!
//! [`by_gradients`] opens the pass of a kind trained by gradients, as the model's solver and
//! parallelism say: mini-batch steps ([`crate::TrainTask`]), a full-batch gradient
//! ([`crate::lbfgs::task::GradientTask`]) or a model rotation worker
//! ([`crate::RotationTask`]).

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;

use crate::error::{Result, input_err};
use crate::kept::Kept;
use crate::key_lists::KeyLists;
use crate::kinds::Inputs;
use crate::lbfgs::task::GradientTask;
use crate::model::Model;
use crate::rotation::RotationTask;
use crate::rows::MiniBatches;
use crate::task::TrainTask;

/// What a pass trained: rows (a topic model: tokens) and their summed loss (a topic model:
/// its documents' log-likelihood; a boosted model's first round: the target).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Trained {
    pub rows: u64,
    pub loss: f64,
}

impl std::ops::AddAssign for Trained {
    fn add_assign(&mut self, other: Trained) {
        self.rows += other.rows;
        self.loss += other.loss;
    }
}

/// Hears the rows and summed loss a pass trains as it goes, for the job's progress bar.
pub type Progress<'a> = &'a mut dyn FnMut(u64, f64);

/// See the module documentation.
pub trait TaskPass: fmt::Debug + Send + Sync {
    /// One batch of the call's columns after the model's name: trains on it, or keeps it for
    /// [`TaskPass::finish`]; returns what it trained now.
    fn add(&mut self, columns: &[ArrayRef], progress: Progress) -> Result<Trained>;

    /// The task's rows ended: trains what it kept, pushes what it holds; returns what it
    /// trained now.
    fn finish(&mut self, progress: Progress) -> Result<Trained>;
}

/// What the process lends a task's pass: the function its rows come through (for errors
/// naming it) and what the job keeps across epochs and rounds.
#[derive(Debug, Clone)]
pub struct TaskContext {
    pub function: &'static str,
    /// The training batches kept across epochs (key-list caching).
    pub key_lists: KeyLists,
    /// The workers kept from round to round of a statement.
    pub kept: Kept,
}

/// The pass of a kind trained by gradients over `model`: see the module documentation.
pub fn by_gradients(model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
    let rows = Batches {
        function: context.function,
        key_lists: context.key_lists.clone(),
    };
    Ok(match (model.spec.solver.method, model.spec.sync.rotation) {
        (Some(_), _) => Box::new(FullBatch {
            task: GradientTask::new(model),
            rows,
        }),
        (None, true) => Box::new(RotationTask::new(
            model,
            context.function,
            context.kept.clone(),
        )),
        (None, false) => Box::new(Steps {
            task: TrainTask::new(model),
            rows,
        }),
    })
}

/// The label and the input columns of a call's columns, as a kind trained by gradients reads
/// them: `label, indices [, values]` or `user, item, rating`.
pub fn label_and_inputs<'a>(
    function: &str,
    model: &Model,
    columns: &'a [ArrayRef],
) -> Result<(&'a ArrayRef, &'a [ArrayRef])> {
    match (model.spec.kind.inputs(), columns) {
        (Inputs::Features, [label, inputs @ ..]) if !inputs.is_empty() => Ok((label, inputs)),
        (Inputs::Pairs, [_, _, rating]) => Ok((rating, &columns[..2])),
        (inputs, _) => input_err(format!(
            "{function}: model '{}' is a {} model, whose rows are {}; got {} columns",
            model.name,
            model.spec.kind.name(),
            inputs.describe(),
            columns.len()
        )),
    }
}

/// How a gradient pass reads a batch of rows into mini-batches: once, when the job keeps
/// them across epochs.
#[derive(Debug)]
struct Batches {
    function: &'static str,
    key_lists: KeyLists,
}

impl Batches {
    /// The mini-batches of one batch of `model`'s rows (the call's `columns`).
    fn read(&self, model: &Model, columns: &[ArrayRef]) -> Result<Arc<MiniBatches>> {
        let (label, inputs) = label_and_inputs(self.function, model, columns)?;
        let read = || (model.spec).mini_batches(self.function, &model.name, (label, inputs));
        self.key_lists.get_or_read(&model.name, columns, read)
    }
}

/// Mini-batch steps, as the rows come: one pull and one push per mini-batch.
#[derive(Debug)]
struct Steps {
    task: TrainTask,
    rows: Batches,
}

impl TaskPass for Steps {
    fn add(&mut self, columns: &[ArrayRef], progress: Progress) -> Result<Trained> {
        let batches = self.rows.read(self.task.model(), columns)?;
        let loss = self.task.train(&batches, progress)?;
        Ok(Trained {
            rows: batches.rows.len() as u64,
            loss,
        })
    }

    fn finish(&mut self, _: Progress) -> Result<Trained> {
        self.task.finish()?;
        Ok(Trained::default())
    }
}

/// A full-batch solver's pass: the gradient of every row summed, pushed when they end.
#[derive(Debug)]
struct FullBatch {
    task: GradientTask,
    rows: Batches,
}

impl TaskPass for FullBatch {
    fn add(&mut self, columns: &[ArrayRef], progress: Progress) -> Result<Trained> {
        let batches = self.rows.read(self.task.model(), columns)?;
        let summed = self.task.add(&batches)?;
        progress(summed.rows, summed.loss);
        Ok(summed)
    }

    fn finish(&mut self, _: Progress) -> Result<Trained> {
        // Its rows were counted as they came.
        self.task.finish()?;
        Ok(Trained::default())
    }
}
