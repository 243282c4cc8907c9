//! Names for the changes SQL tasks send that stay the same when Ballista runs a task again
//! (its executor died, or the executor holding its output did), so servers refuse what the
//! first run already applied: counts are not doubled and mini-batches are not applied twice.
//!
//! Every executor ([`name_tasks`], called by `angel-ps executor` on each task's plan) puts the
//! aggregates holding a PS-bound function ([`crate::bound_functions`]) under a [`TaskNamesExec`] whose
//! token is derived from the run ([`run_of`]: one per query, the statement and, for training,
//! the epoch; the same when a cancelled job is submitted again), the stage and the partitions
//! the task computes. Polling partition `p` it sets the task's
//! run, derived from the token and `p`'s global number; each PS accumulator of the task takes
//! its own name from the run in the order they first see rows, and numbers its changes
//! (flushes, mini-batches) from 0. A run again computes the same partitions from the same
//! input in the same order (Ballista turns off round-robin repartitioning), so it repeats the
//! same names for the same changes.
//!
//! Outside Ballista (embedded DataFusion runs a task once) there is no run, and the client
//! names changes itself.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use angel_client::task_change::{TaskRun, mix};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use datafusion::prelude::SessionConfig;
use futures::{Stream, StreamExt};

use crate::bound_functions;

/// Runs an aggregate with the run of the task set while it is polled.
#[derive(Debug)]
pub struct TaskNamesExec {
    input: Arc<dyn ExecutionPlan>,
    token: u64,
    /// The global number of each partition the task computes, by local number.
    partitions: Vec<u64>,
}

impl TaskNamesExec {
    /// `input` run under passes derived from `token` and the global `partitions`.
    pub fn new(input: Arc<dyn ExecutionPlan>, token: u64, partitions: Vec<u64>) -> Self {
        TaskNamesExec {
            input,
            token,
            partitions,
        }
    }

    /// The run of local partition `local`.
    fn run(&self, local: usize) -> Arc<TaskRun> {
        match self.partitions.get(local) {
            Some(&global) => TaskRun::new(&[self.token, global]),
            // Not expected: a task computes as many partitions as it was given.
            None => TaskRun::new(&[self.token, u64::MAX, local as u64]),
        }
    }
}

/// The run a task of job `job` belongs to: the token the client put in the job's name
/// ([`super::resubmit`]: the same when a cancelled job is submitted again), else the job.
pub fn run_of(job: &str, config: &SessionConfig) -> u64 {
    super::resubmit::run_token(config).unwrap_or_else(|| xxhash_rust::xxh3::xxh3_64(job.as_bytes()))
}

/// `plan` of one Ballista task (of `run`, `stage`, computing the global `partitions`) with
/// every aggregate of a PS-bound function under a [`TaskNamesExec`].
pub fn name_tasks(
    plan: Arc<dyn ExecutionPlan>,
    run: u64,
    stage: usize,
    partitions: &[usize],
) -> Result<Arc<dyn ExecutionPlan>> {
    let token = mix(&[run, stage as u64]);
    let partitions: Vec<u64> = partitions.iter().map(|&p| p as u64).collect();
    let ps = bound_functions::aggregates();
    plan.transform_up(|node| {
        let pushes = node.downcast_ref::<AggregateExec>().is_some_and(|a| {
            a.aggr_expr()
                .iter()
                .any(|e| ps.iter().any(|f| (f.binding)(e.fun()).is_some()))
        });
        Ok(match pushes {
            true => {
                Transformed::yes(Arc::new(TaskNamesExec::new(node, token, partitions.clone())) as _)
            }
            false => Transformed::no(node),
        })
    })
    .map(|t| t.data)
}

impl DisplayAs for TaskNamesExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "TaskNamesExec: token={:#x}, partitions={:?}",
            self.token, self.partitions
        )
    }
}

impl ExecutionPlan for TaskNamesExec {
    fn name(&self) -> &str {
        "TaskNamesExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let input = super::one_child("TaskNamesExec", children)?;
        let partitions = self.partitions.clone();
        Ok(Arc::new(TaskNamesExec::new(input, self.token, partitions)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let run = self.run(partition);
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(NamedStream { input, run }))
    }
}

/// The aggregate's stream, polled with its task's run set.
struct NamedStream {
    input: SendableRecordBatchStream,
    run: Arc<TaskRun>,
}

impl Stream for NamedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let run = self.run.clone();
        run.scope(|| self.input.poll_next_unpin(cx))
    }
}

impl RecordBatchStream for NamedStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}
