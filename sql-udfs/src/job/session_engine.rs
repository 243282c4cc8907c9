//! [`SessionEngine`]: the job's DataFusion session as the engine a kind's driver runs its
//! statement on: passes of `ps_train` over the statement's rows (the progress bar moving as
//! the tasks report), queries of the driver's SQL, and key-list caching while the rows are
//! held in memory.

use std::sync::Arc;

use angel_client::PsClient;
use angel_training::Error as TrainError;
use angel_training::driver::engine::{Passed, TrainingQuery, Watch};
use angel_training::kept::Kept;
use angel_training::{Engine, Plan};
use datafusion::arrow::array::RecordBatch;
use datafusion::common::Result;
use datafusion::prelude::SessionContext;

use super::answers::{first_row, float};
use super::caching::Caching;
use super::progress::watch;
use super::resume::Resume;
use super::train_rows::Rows;
use crate::binding::Binding;
use crate::bridge::engine_error;

/// See the module documentation.
pub(super) struct SessionEngine<'a> {
    ctx: &'a SessionContext,
    binding: &'a Binding,
    model: &'a str,
    client: Arc<PsClient>,
    plan: Plan,
    rows: Rows,
    /// On while the statement's rows are held in memory.
    caching: Option<Caching<'a>>,
    /// The job's run, which records each completed epoch.
    resume: Option<&'a Resume>,
}

impl<'a> SessionEngine<'a> {
    /// The engine of the statement training `model` as `plan` says over `rows`.
    pub(super) fn new(
        (ctx, binding): (&'a SessionContext, &'a Binding),
        model: &'a str,
        plan: Plan,
        rows: Rows,
    ) -> Result<Self> {
        // Rows held in memory reach ps_train as the same batches every epoch: read them once.
        let caching = rows.query.in_memory.then(|| Caching::on(binding, model));
        Ok(SessionEngine {
            ctx,
            binding,
            model,
            client: binding.client()?,
            plan,
            rows,
            caching,
            resume: None,
        })
    }

    /// The same engine, recording each completed epoch with the job's run `resume`.
    pub(super) fn recording(self, resume: Option<&'a Resume>) -> Self {
        SessionEngine { resume, ..self }
    }
}

#[async_trait::async_trait]
impl Engine for SessionEngine<'_> {
    fn model(&self) -> &str {
        self.model
    }

    fn client(&self) -> &Arc<PsClient> {
        &self.client
    }

    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn query(&self) -> &TrainingQuery {
        &self.rows.query
    }

    async fn pass(&self, skip: usize, shown: Option<Watch<'_>>) -> Result<Passed, TrainError> {
        let workers = self.plan.workers();
        let frame =
            (self.rows.rows.epoch(self.ctx, (self.model, workers), skip)).map_err(engine_error)?;
        let answer = match shown {
            Some(w) => {
                let reports = (&*self.binding.reports().progress, &*self.client, self.model);
                watch(
                    w.bar,
                    reports,
                    (w.epoch, w.epochs, w.shows_loss),
                    first_row(frame),
                )
                .await
            }
            None => first_row(frame).await,
        };
        let (mean, rows) = answer.map_err(engine_error)?;
        Ok(Passed {
            mean: float(&mean),
            rows: float(&rows).unwrap_or_default() as u64,
        })
    }

    async fn answer(&self, sql: &str) -> Result<Vec<RecordBatch>, TrainError> {
        let frame = self.ctx.sql(sql).await.map_err(engine_error)?;
        frame.collect().await.map_err(engine_error)
    }

    fn cached_after(&self, epoch: usize) -> u64 {
        self.caching.as_ref().map_or(0, |c| c.after_epoch(epoch))
    }

    fn kept(&self) -> &Kept {
        self.binding.kept()
    }

    async fn epoch_done(&self, epoch: usize) -> Result<(), TrainError> {
        match self.resume {
            Some(resume) => resume.epoch_done(epoch).await.map_err(engine_error),
            None => Ok(()),
        }
    }
}
