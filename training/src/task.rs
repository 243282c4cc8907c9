//! [`TrainTask`]: one task's training pass over its rows, whatever runs the task (a SQL
//! aggregate, a program).
//!
//! Each mini-batch is one pull of the weights of the distinct keys it uses, the loss gradient
//! over its rows, and one merged push of gradients that the servers turn into weights with the
//! model's optimizer. The task is a worker in its model's clock table ([`ClockWorker`]): before
//! each pull it waits as the model's consistency model (BSP, SSP, ASP) requires, and its update
//! rule ([`crate::update`]) decides what it pushes.

use std::sync::Arc;

use angel_client::{ChangeNames, PsClient};

use crate::error::Result;
use crate::model::Model;
use crate::rows::{Gathered, MiniBatches};
use crate::sync::worker::ClockWorker;
use crate::update::average::LocalModel;
use crate::update::sgd::{self, Ahead};

/// See the module documentation.
#[derive(Debug)]
pub struct TrainTask {
    model: Model,
    /// This task's place in the model's clock table, from its first mini-batch on.
    worker: Option<ClockWorker>,
    /// Names of its pushes in a Ballista task, so a rerun of the task repeats them.
    names: Option<ChangeNames>,
    /// Model averaging: the round being trained locally.
    local: LocalModel,
}

impl TrainTask {
    /// A pass over model `name` of `client`'s service.
    pub fn open(client: Arc<PsClient>, name: &str) -> Result<Self> {
        Ok(TrainTask::new(Model::open(client, name)?))
    }

    /// A pass over `model`.
    pub fn new(model: Model) -> Self {
        TrainTask {
            model,
            worker: None,
            names: None,
            local: LocalModel::default(),
        }
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Trains on the mini-batches of one batch of rows, in order, telling `progress` the rows
    /// and summed loss of each; returns the summed loss.
    pub fn train(
        &mut self,
        batches: &MiniBatches,
        mut progress: impl FnMut(u64, f64),
    ) -> Result<f64> {
        if self.worker.is_none()
            && let Some((range, first)) = batches.batches.first()
        {
            self.join(batches.rows.fingerprint(range.clone(), first))?;
        }
        let mut ahead = None;
        let mut sum = 0.0;
        for (i, (range, g)) in batches.batches.iter().enumerate() {
            let next = batches.batches.get(i + 1).map(|(_, g)| g);
            let batch = (&batches.rows, range.clone(), g);
            let loss = self.step(batch, (&mut ahead, next))?;
            progress(range.len() as u64, loss);
            sum += loss;
        }
        Ok(sum)
    }

    /// Joins the model's clock table, ordered by the `fingerprint` of the task's first
    /// mini-batch (so BSP orders pushes the same way at every run).
    fn join(&mut self, fingerprint: u64) -> Result<()> {
        self.names = ChangeNames::for_accumulator();
        self.worker = Some(ClockWorker::join(
            self.model.client().clone(),
            &self.model.name,
            &self.model.spec.sync,
            self.names.as_ref().map_or(0, ChangeNames::task),
            fingerprint,
        )?);
        Ok(())
    }

    /// Trains on one mini-batch; returns the summed loss of its rows.
    fn step(
        &mut self,
        batch: (&crate::rows::SparseRows, std::ops::Range<usize>, &Gathered),
        pipeline: (&mut Option<Ahead>, Option<&Gathered>),
    ) -> Result<f64> {
        let Some(worker) = self.worker.as_mut() else {
            return Ok(0.0);
        };
        match angel_optim::rule::of(self.model.spec.sync.rule).averages() {
            true => self
                .local
                .step((&self.model, worker), batch, &mut self.names),
            false => {
                let change = self.names.as_mut().map(ChangeNames::next_change);
                sgd::step((&self.model, worker), batch, pipeline, change)
            }
        }
    }

    /// The task's data ended: pushes what model averaging holds, and leaves the clock table.
    pub fn finish(&mut self) -> Result<()> {
        if let Some(worker) = self.worker.as_mut() {
            self.local.flush((&self.model, worker), &mut self.names)?;
            worker.leave()?;
        }
        Ok(())
    }
}
