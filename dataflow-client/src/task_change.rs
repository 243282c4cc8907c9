//! [`TaskChange`]: a change named by the SQL task that makes it rather than by the process
//! that sends it, so a task run again (its executor died) is recognised: its resent changes
//! carry the same names, and servers refuse those they applied before.
//!
//! A task's [`TaskRun`] (one run of it over its data) is set while the task's aggregate is
//! polled (on Ballista, by the executor: `angel_sql::ballista::task_names`); each accumulator
//! of the task takes its [`ChangeNames`] from the run in the order they first see rows, and
//! numbers its changes from 0. Outside a run (embedded DataFusion runs a task once) there are
//! none, and the client names changes itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One change of a task's run over its data: `task` is derived from the query and the task's
/// partition (the same when the task runs again), `seq` counts the task's changes from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskChange {
    /// The task's run; never 0 (0 means "no task" on the wire).
    pub task: u64,
    /// The change's number within the run.
    pub seq: u64,
}

tokio::task_local! {
    /// The run of the task whose aggregate is being polled.
    static RUN: Arc<TaskRun>;
}

/// One task's run: its number, and how many accumulators took a name from it.
#[derive(Debug)]
pub struct TaskRun {
    id: u64,
    named: AtomicU64,
}

impl TaskRun {
    /// The run numbered by `parts` (what makes it the same on a rerun: the query's token and
    /// the partition's global number).
    pub fn new(parts: &[u64]) -> Arc<TaskRun> {
        Arc::new(TaskRun {
            id: mix(parts),
            named: AtomicU64::new(0),
        })
    }

    /// Runs `f` with this run set, so accumulators first seeing rows in `f` name from it.
    pub fn scope<R>(self: &Arc<Self>, f: impl FnOnce() -> R) -> R {
        RUN.sync_scope(self.clone(), f)
    }
}

/// A non-zero mix of `parts` (0 means "no task" on the wire): how task, run and query tokens
/// are numbered.
pub fn mix(parts: &[u64]) -> u64 {
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
    /// Names for an accumulator of the task being polled, or None outside a run. Call it
    /// when the accumulator sees its first rows, so the order is the data's.
    pub fn for_accumulator() -> Option<Self> {
        RUN.try_with(|pass| ChangeNames {
            task: mix(&[pass.id, pass.named.fetch_add(1, Ordering::Relaxed)]),
            next: 0,
        })
        .ok()
    }

    /// The accumulator's own name (never 0): its task's run and its place in it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accumulators_of_a_pass_get_distinct_names_that_repeat_on_a_rerun() {
        let names = |token: u64, partition: u64| {
            TaskRun::new(&[token, partition]).scope(|| {
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
