//! Names for the changes SQL tasks send that stay the same when Ballista runs a task again
//! (its executor died, or the executor holding its output did), so servers refuse what the
//! first run already applied: counts are not doubled and mini-batches are not applied twice.
//!
//! Every executor ([`name_tasks`], called by `angel-ps executor` on each task's plan) puts the
//! aggregates holding a PS function ([`crate::ps_functions`]) under a [`TaskNamesExec`] whose
//! token is derived from the job (one per query: the statement and, for training, the epoch),
//! the stage and the partitions the task computes. Polling partition `p` it sets the task's
//! pass, derived from the token and `p`'s global number; each PS accumulator of the task takes
//! its own name from the pass in the order they first see rows, and numbers its changes
//! (flushes, mini-batches) from 0. A run again computes the same partitions from the same
//! input in the same order (Ballista turns off round-robin repartitioning), so it repeats the
//! same names for the same changes.
//!
//! Outside Ballista (embedded DataFusion runs a task once) there is no pass, and the client
//! names changes itself.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use angel_client::TaskChange;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, internal_err};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use futures::{Stream, StreamExt};

use crate::ps_functions;

tokio::task_local! {
    /// The pass of the task whose aggregate is being polled.
    static PASS: Arc<Pass>;
}

/// One task's pass: its number, and how many accumulators took a name from it.
#[derive(Debug)]
struct Pass {
    id: u64,
    named: AtomicU64,
}

/// A non-zero mix of `parts` (0 means "no task" on the wire).
fn mix(parts: &[u64]) -> u64 {
    let bytes: Vec<u8> = parts.iter().flat_map(|p| p.to_le_bytes()).collect();
    xxhash_rust::xxh3::xxh3_64(&bytes).max(1)
}

/// The names of one accumulator's changes.
#[derive(Debug)]
pub struct ChangeNames {
    task: u64,
    next: u64,
}

impl ChangeNames {
    /// Names for an accumulator of the task being polled, or None outside a Ballista task.
    /// Call it when the accumulator sees its first rows, so the order is the data's.
    pub fn for_accumulator() -> Option<Self> {
        PASS.try_with(|pass| ChangeNames {
            task: mix(&[pass.id, pass.named.fetch_add(1, Ordering::Relaxed)]),
            next: 0,
        })
        .ok()
    }

    /// The accumulator's own name (never 0): its task's pass and its place in it.
    pub fn task(&self) -> u64 {
        self.task
    }

    /// The name of the accumulator's next change.
    pub fn next_change(&mut self) -> TaskChange {
        let change = TaskChange {
            task: self.task,
            seq: self.next,
        };
        self.next += 1;
        change
    }
}

/// Runs an aggregate with the pass of the task set while it is polled.
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

    /// The pass id of local partition `local`.
    fn pass(&self, local: usize) -> u64 {
        match self.partitions.get(local) {
            Some(&global) => mix(&[self.token, global]),
            // Not expected: a task computes as many partitions as it was given.
            None => mix(&[self.token, u64::MAX, local as u64]),
        }
    }
}

/// `plan` of one Ballista task (of `job`, `stage`, computing the global `partitions`) with
/// every aggregate of a PS function under a [`TaskNamesExec`].
pub fn name_tasks(
    plan: Arc<dyn ExecutionPlan>,
    job: &str,
    stage: usize,
    partitions: &[usize],
) -> Result<Arc<dyn ExecutionPlan>> {
    let token = mix(&[xxhash_rust::xxh3::xxh3_64(job.as_bytes()), stage as u64]);
    let partitions: Vec<u64> = partitions.iter().map(|&p| p as u64).collect();
    let ps = ps_functions::aggregates();
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
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match children.len() {
            1 => Ok(Arc::new(TaskNamesExec::new(
                children.remove(0),
                self.token,
                self.partitions.clone(),
            ))),
            n => internal_err!("TaskNamesExec has one child, got {n}"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let pass = Arc::new(Pass {
            id: self.pass(partition),
            named: AtomicU64::new(0),
        });
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(NamedStream { input, pass }))
    }
}

/// The aggregate's stream, polled with its task's pass set.
struct NamedStream {
    input: SendableRecordBatchStream,
    pass: Arc<Pass>,
}

impl Stream for NamedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let pass = self.pass.clone();
        PASS.sync_scope(pass, || self.input.poll_next_unpin(cx))
    }
}

impl RecordBatchStream for NamedStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accumulators_of_a_pass_get_distinct_names_that_repeat_on_a_rerun() {
        let names = |token: u64, partition: u64| {
            let pass = Arc::new(Pass {
                id: mix(&[token, partition]),
                named: AtomicU64::new(0),
            });
            PASS.sync_scope(pass, || {
                let mut a = ChangeNames::for_accumulator().unwrap();
                let mut b = ChangeNames::for_accumulator().unwrap();
                let (a0, a1, b0) = (a.next_change(), a.next_change(), b.next_change());
                assert_ne!(a0.task, b0.task);
                assert_eq!((a0.seq, a1.seq, b0.seq), (0, 1, 0));
                (a0.task, b0.task)
            })
        };
        assert_eq!(names(7, 3), names(7, 3), "a rerun repeats the names");
        assert_ne!(names(7, 3), names(7, 4), "another partition");
        assert_ne!(names(7, 3), names(8, 3), "another query");
        assert!(ChangeNames::for_accumulator().is_none(), "outside a task");
    }
}
