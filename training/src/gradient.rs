//! What a kind trained by gradients is given: implementing the model interface's
//! [`ModelKind`] and [`Gradient`] is all it writes, and this file implements [`Trains`] for
//! it. Its worker half is a pass of mini-batch steps ([`TrainTask`]), of a full-batch
//! gradient ([`GradientTask`]) or of a model rotation worker ([`RotationTask`]), as the
//! model's solver and parallelism say, each reading its rows into mini-batches once when the
//! job keeps them across epochs; its driver half mini-batch epochs
//! ([`crate::driver::epochs`]) or a full-batch solver's iterations
//! ([`crate::lbfgs::driver`]); its saved format the weights ([`crate::saved::weights`]).

use std::collections::HashMap;
use std::sync::Arc;

use angel_client::PsClient;
use arrow::array::{ArrayRef, RecordBatch};

use crate::driver::epochs;
use crate::error::Result;
use crate::key_lists::KeyLists;
use crate::kinds::Gradient;
use crate::lbfgs::driver as full_batch;
use crate::lbfgs::task::GradientTask;
use crate::model::{Engine, Model, ModelKind, ModelSpec, Trains};
use crate::rotation::RotationTask;
use crate::rows::MiniBatches;
use crate::saved::{ReadBack, Saved, SavedTable, TableSink, weights};
use crate::task::TrainTask;
use crate::task_pass::{Progress, TaskContext, TaskPass, Trained};

#[async_trait::async_trait]
impl<T: ModelKind + Gradient> Trains for T {
    fn gradient(&self) -> Option<&dyn Gradient> {
        Some(self)
    }

    fn open_pass(&self, model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
        open_pass(model, context)
    }

    async fn drive(&self, engine: &dyn Engine) -> Result<RecordBatch> {
        match engine.plan().spec.solver.method {
            Some(_) => full_batch::train(engine).await,
            None => epochs::train(engine).await,
        }
    }

    fn saved_tables(&self) -> Vec<SavedTable> {
        vec![weights::table()]
    }

    async fn save(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        features: &HashMap<u64, String>,
        sink: &mut dyn TableSink,
    ) -> Result<Saved> {
        weights::save(client, name, spec, features, sink).await
    }

    async fn load(
        &self,
        client: &PsClient,
        (name, spec): (&str, &ModelSpec),
        read: &ReadBack,
    ) -> Result<()> {
        weights::load(client, name, spec, read).await
    }
}

/// The pass of a kind trained by gradients over `model`, as its solver and parallelism say.
fn open_pass(model: Model, context: &TaskContext) -> Result<Box<dyn TaskPass>> {
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
        let (label, inputs) = model.label_and_inputs(self.function, columns)?;
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
